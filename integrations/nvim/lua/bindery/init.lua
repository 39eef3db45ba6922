-- bindery for Neovim (0.7 and later): a statusline component and
-- :Bindery commands, fed by the daemon's live event feed.
--
-- The plugin talks to bindery only through its CLI, the documented client
-- (`bindery tail --json` streams the feed as one JSON object a line;
-- `sessions --json --cwd`, `report --json --session` answer queries), so it
-- needs no HTTP or websocket code of its own and speaks exactly the
-- contract the CLI does. Updates are pushed: the feed job's lines update
-- the state and redraw the statusline; the session list and report are
-- fetched again only when an event says they changed. The one timer is
-- the reconnect after the daemon went away.
local format = require("bindery.format")

local M = {}

M.config = {
  cmd = "bindery", -- the bindery binary
  socket = nil, -- --socket PATH; nil: the CLI's default (BINDERY_SOCKET, XDG_RUNTIME_DIR)
  workspace = nil, -- function returning the workspace folder; nil: the current directory
  reconnect_ms = 2000, -- wait before following the feed again after it ended
  refresh_ms = 250, -- events arriving together cause one refresh
  open = nil, -- function(path) opening the report chart; nil: xdg-open or open
}

-- state is what the statusline shows (format.statusline documents it).
M.state = { up = nil }

local feed = { job = nil, last_seq = nil, partial = "", stopped = true, timer = nil }
local tail_buf = nil
local refresh_timer = nil

local function args(...)
  local a = { M.config.cmd }
  for _, v in ipairs({ ... }) do
    a[#a + 1] = v
  end
  if M.config.socket then
    a[#a + 1] = "--socket"
    a[#a + 1] = M.config.socket
  end
  return a
end

local function workspace()
  if M.config.workspace then
    return M.config.workspace()
  end
  return vim.fn.getcwd()
end

local function changed()
  vim.cmd("redrawstatus!")
  vim.cmd("doautocmd <nomodeline> User BinderyUpdate")
end

-- run starts the CLI with argv and calls done(code, stdout, stderr) on the
-- main loop when it exits.
local function run(argv, done)
  local out, err = {}, {}
  local ok, job = pcall(vim.fn.jobstart, argv, {
    stdout_buffered = true,
    stderr_buffered = true,
    on_stdout = function(_, data) out = data end,
    on_stderr = function(_, data) err = data end,
    on_exit = function(_, code)
      vim.schedule(function() done(code, table.concat(out, "\n"), table.concat(err, "\n")) end)
    end,
  })
  if not ok or job <= 0 then
    vim.schedule(function() done(-1, "", "cannot run " .. tostring(argv[1])) end)
  end
end

local function decode(text)
  local ok, v = pcall(vim.fn.json_decode, text)
  if ok then
    return v
  end
  return nil
end

-- refresh fetches the workspace's live session and its report. The live
-- session is the one with the latest last activity among those pi ran in
-- the workspace (GET /v1/sessions?cwd=).
function M.refresh(done)
  run(args("sessions", "--json", "--cwd", workspace()), function(code, out)
    if code == 3 then
      M.state.up = false
      changed()
      return done and done()
    end
    local list = code == 0 and decode(out)
    if not list then
      return done and done()
    end
    M.state.up = true
    local live
    for _, s in ipairs(list.sessions or {}) do
      if not s.removed and (not live or (s.lastActivity or "") > (live.lastActivity or "")) then
        live = s
      end
    end
    local id = live and live.id or nil
    if id ~= M.state.session then
      M.state.session = id
      M.state.kept, M.state.stripped, M.state.last_strip = nil, nil, nil
    end
    if not id then
      M.state.hit_ratio, M.state.spend_today = nil, nil
      changed()
      return done and done()
    end
    run(args("report", "--json", "--session", id), function(rc, rout)
      local rep = rc == 0 and decode(rout)
      if rep and rep.figures then
        M.state.hit_ratio = rep.figures.cache and rep.figures.cache.hitRatio
        M.state.spend_today = format.spend_on(rep.requests, os.date("%Y-%m-%d"))
      end
      changed()
      return done and done()
    end)
  end)
end

local function schedule_refresh()
  if refresh_timer then
    return
  end
  refresh_timer = vim.loop.new_timer()
  refresh_timer:start(M.config.refresh_ms, 0, vim.schedule_wrap(function()
    refresh_timer:close()
    refresh_timer = nil
    M.refresh()
  end))
end

local function on_event(ev)
  if type(ev.seq) == "number" and ev.seq > 0 then
    feed.last_seq = ev.seq
  end
  if tail_buf and vim.api.nvim_buf_is_valid(tail_buf) then
    vim.api.nvim_buf_set_lines(tail_buf, -1, -1, false, { format.event_line(ev) })
  end
  local mine = ev.conversation ~= nil and ev.conversation == M.state.session
  if ev.type == "compile" and mine then
    M.state.kept, M.state.stripped = ev.thinkingKept, ev.thinkingStripped
    if (ev.thinkingStripped or 0) > 0 and type(ev.strips) == "table" and #ev.strips > 0 then
      local last = ev.strips[#ev.strips]
      M.state.last_strip = { reason = last.reason, path = last.path }
    end
    changed()
  end
  if ev.type == "accept" and mine or ev.type == "session" or ev.type == "reset" then
    schedule_refresh() -- new spend and cache figures, or perhaps a new live session
  end
end

local function on_lines(data)
  -- jobstart hands over chunks: the first item continues the last line of
  -- the previous chunk, the last item is the start of the next line.
  data[1] = feed.partial .. data[1]
  feed.partial = table.remove(data)
  for _, line in ipairs(data) do
    if line ~= "" then
      local ev = decode(line)
      if type(ev) == "table" then
        on_event(ev)
      end
    end
  end
end

local follow

local function reconnect()
  if feed.stopped or feed.timer then
    return
  end
  feed.timer = vim.loop.new_timer()
  feed.timer:start(M.config.reconnect_ms, 0, vim.schedule_wrap(function()
    feed.timer:close()
    feed.timer = nil
    follow()
  end))
end

-- follow runs `bindery tail --json`, from just after the last event seen
-- when there is one (so nothing is missed across a daemon restart), else
-- live from now.
follow = function()
  if feed.stopped then
    return
  end
  local a = { "tail", "--json", "--no-reconnect" }
  if feed.last_seq then
    a[#a + 1] = "--since"
    a[#a + 1] = tostring(feed.last_seq)
  end
  feed.partial = ""
  local ok, job = pcall(vim.fn.jobstart, args(unpack(a)), {
    on_stdout = function(_, data) on_lines(data) end,
    on_exit = function()
      vim.schedule(function()
        feed.job = nil
        if feed.stopped then
          return
        end
        M.state.up = false
        changed()
        reconnect()
      end)
    end,
  })
  if not ok or job <= 0 then
    feed.job = nil
    M.state.up = false
    changed()
    return reconnect()
  end
  feed.job = job
  M.refresh()
end

-- start follows the feed (setup calls it); stop ends it.
function M.start()
  if not feed.stopped then
    return
  end
  feed.stopped = false
  follow()
end

function M.stop()
  feed.stopped = true
  if feed.timer then
    feed.timer:close()
    feed.timer = nil
  end
  if feed.job then
    vim.fn.jobstop(feed.job)
    feed.job = nil
  end
end

-- statusline is the component: call it from any statusline plugin, or
-- set statusline=%{v:lua.require'bindery'.statusline()}.
function M.statusline()
  return format.statusline(M.state)
end

local function scratch(name, lines)
  vim.cmd("botright new")
  local buf = vim.api.nvim_get_current_buf()
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].swapfile = false
  pcall(vim.api.nvim_buf_set_name, buf, name)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  return buf
end

local function show_output(name, argv)
  run(argv, function(code, out, err)
    local lines = vim.split(out, "\n", { plain = true })
    if err ~= "" then
      vim.list_extend(lines, vim.split(err, "\n", { plain = true }))
    end
    while #lines > 0 and lines[#lines] == "" do
      table.remove(lines)
    end
    if code ~= 0 and #lines == 0 then
      lines = { string.format("bindery exited with %d", code) }
    end
    scratch(name, lines)
  end)
end

local function open_file(path)
  if M.config.open then
    return M.config.open(path)
  end
  local opener = vim.fn.has("mac") == 1 and "open" or "xdg-open"
  vim.fn.jobstart({ opener, path }, { detach = true })
end

M.commands = {
  status = function()
    show_output("bindery://status", args("status"))
  end,
  sessions = function()
    show_output("bindery://sessions", args("sessions", "--cwd", workspace()))
  end,
  -- conversations: bindery proxy's (Claude Code, opencode, the SDKs) and
  -- other hosts', which belong to no workspace: every one, with its
  -- replies' cache figures and retries.
  conversations = function()
    show_output("bindery://conversations", args("conversations"))
  end,
  show = function(id)
    id = id or M.state.session
    if not id then
      return vim.notify("bindery: no pi session in this workspace; name one", vim.log.levels.WARN)
    end
    show_output("bindery://show/" .. id, args("show", id))
  end,
  report = function(id)
    id = id or M.state.session
    if not id then
      return vim.notify("bindery: no pi session in this workspace; name one", vim.log.levels.WARN)
    end
    local path = vim.fn.tempname() .. ".html"
    run(args("report", "--session", id, "--chart", path), function(code, _, err)
      if code ~= 0 then
        return vim.notify("bindery report: " .. err, vim.log.levels.ERROR)
      end
      M.last_chart = path
      open_file(path)
    end)
  end,
  tail = function()
    if tail_buf and vim.api.nvim_buf_is_valid(tail_buf) then
      return
    end
    vim.cmd("botright 12new")
    vim.wo.wrap = false -- one event a line, as the feed sends them
    tail_buf = vim.api.nvim_get_current_buf()
    vim.bo[tail_buf].buftype = "nofile"
    vim.bo[tail_buf].bufhidden = "wipe"
    vim.bo[tail_buf].swapfile = false
    pcall(vim.api.nvim_buf_set_name, tail_buf, "bindery://tail")
    vim.api.nvim_buf_set_lines(tail_buf, 0, -1, false, { "bindery feed: live events appear below" })
  end,
}

local function complete()
  local names = {}
  for k in pairs(M.commands) do
    names[#names + 1] = k
  end
  table.sort(names)
  return names
end

function M.setup(opts)
  M.config = vim.tbl_extend("force", M.config, opts or {})
  vim.api.nvim_create_user_command("Bindery", function(o)
    local sub = o.fargs[1] or "status"
    local fn = M.commands[sub]
    if not fn then
      return vim.notify("bindery: no command " .. sub .. " (" .. table.concat(complete(), ", ") .. ")", vim.log.levels.ERROR)
    end
    fn(o.fargs[2])
  end, { nargs = "*", complete = function() return complete() end })
  -- Leaving Neovim ends the feed job and the timers with it.
  vim.api.nvim_create_autocmd("VimLeavePre", { callback = function() M.stop() end })
  M.start()
end

return M
