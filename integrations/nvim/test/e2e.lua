-- Driven by cmd/bindery's TestNeovimPlugin against a real `bindery serve`:
-- the plugin runs as a user has it; this script only records what a user
-- would see (the statusline, each time it changes, and the buffers the
-- commands open) and runs the commands the Go test asks for, one request
-- file at a time in BINDERY_TEST_OUT.
local out = assert(os.getenv("BINDERY_TEST_OUT"), "BINDERY_TEST_OUT")
local bindery = require("bindery")

local function append(name, line)
  local f = assert(io.open(out .. "/" .. name, "a"))
  f:write(line, "\n")
  f:close()
end

local function write(name, lines)
  local f = assert(io.open(out .. "/" .. name .. ".tmp", "w"))
  f:write(table.concat(lines, "\n"), "\n")
  f:close()
  os.rename(out .. "/" .. name .. ".tmp", out .. "/" .. name)
end

local last
vim.api.nvim_create_autocmd("User", {
  pattern = "BinderyUpdate",
  callback = function()
    local s = bindery.statusline()
    if s ~= last then
      last = s
      append("status.log", s)
    end
  end,
})

bindery.setup({
  cmd = assert(os.getenv("BINDERY_BIN")),
  socket = assert(os.getenv("BINDERY_SOCKET")),
  workspace = function() return assert(os.getenv("BINDERY_TEST_WORKSPACE")) end,
  reconnect_ms = 200,
  refresh_ms = 50,
  open = function(path) write("report.out", { path }) end,
})

local function buffer_named(name)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(b):find(name, 1, true) then
      return b
    end
  end
end

local function dump(bufname, file)
  local b = buffer_named(bufname)
  if b then
    write(file, vim.api.nvim_buf_get_lines(b, 0, -1, false))
  end
end

local function wait_dump(bufname, file)
  vim.wait(20000, function() return buffer_named(bufname) ~= nil end, 20)
  dump(bufname, file)
end

local actions = {
  tail = function() vim.cmd("Bindery tail") end,
  dumptail = function() dump("bindery://tail", "tail.out") end,
  sessions = function()
    vim.cmd("Bindery sessions")
    wait_dump("bindery://sessions", "sessions.out")
  end,
  conversations = function()
    vim.cmd("Bindery conversations")
    wait_dump("bindery://conversations", "conversations.out")
  end,
  show = function()
    vim.cmd("Bindery show")
    wait_dump("bindery://show/", "show.out")
  end,
  report = function() vim.cmd("Bindery report") end,
  quit = function() vim.cmd("qa!") end,
}

local timer = vim.loop.new_timer()
timer:start(50, 50, vim.schedule_wrap(function()
  for name, fn in pairs(actions) do
    local req = out .. "/do-" .. name
    if vim.loop.fs_stat(req) then
      os.remove(req)
      fn()
      write("done-" .. name, { "ok" })
    end
  end
end))
