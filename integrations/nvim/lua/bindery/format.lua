-- Pure text: what the statusline, the tail split and the spend figure
-- show, from plain tables. No Neovim calls here, so every line a user sees
-- is a function of its inputs (tested in test/format_spec.lua).
local M = {}

local function plural(n, one, many)
  if n == 1 then
    return "1 " .. one
  end
  return tostring(n) .. " " .. (many or (one .. "s"))
end
M.plural = plural

-- money prints dollars with cents, and "<$0.01" for a non-zero crumb.
function M.money(x)
  if x == nil then
    return "$?"
  end
  if x > 0 and x < 0.005 then
    return "<$0.01"
  end
  return string.format("$%.2f", x)
end

-- utc_offset is the local zone's offset from UTC in seconds at time t.
local function utc_offset(t)
  return os.time(os.date("*t", t)) - os.time(os.date("!*t", t))
end

-- local_day turns pi's ISO timestamp (UTC, "2026-12-01T21:00:00.000Z")
-- into the local calendar day "2026-12-01", or nil when it is not one.
function M.local_day(ts)
  if type(ts) ~= "string" then
    return nil
  end
  local y, mo, d, h, mi, s = ts:match("^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)")
  if not y then
    return nil
  end
  -- os.time reads the table as local time; shift it back to UTC.
  local t = os.time({ year = tonumber(y), month = tonumber(mo), day = tonumber(d),
    hour = tonumber(h), min = tonumber(mi), sec = tonumber(s) })
  t = t + utc_offset(t)
  return os.date("%Y-%m-%d", t)
end

-- spend_on sums the priced requests of a session report whose timestamp
-- falls on day (local). Unpriced requests are counted apart, never guessed.
function M.spend_on(requests, day)
  local total, unpriced = 0, 0
  for _, r in ipairs(requests or {}) do
    if M.local_day(r.timestamp) == day then
      if type(r.cost) == "number" then
        total = total + r.cost
      else
        unpriced = unpriced + 1
      end
    end
  end
  return total, unpriced
end

-- statusline is the component's text. st holds:
--   up        true, false, or nil (not known yet)
--   session   the workspace's live session id, or nil
--   kept, stripped   the live session's last compile (nil before one)
--   last_strip       {reason=..., path=...} of its last strip, or nil
--   hit_ratio        cache read / prompt tokens, 0..1, or nil
--   spend_today      dollars, or nil
function M.statusline(st)
  if st.up == nil then
    return "bindery …"
  end
  if not st.up then
    return "bindery down"
  end
  if not st.session then
    return "bindery: no pi session here"
  end
  local parts = { "bindery" }
  if st.kept ~= nil then
    parts[#parts + 1] = string.format("kept %d stripped %d", st.kept, st.stripped or 0)
  else
    parts[#parts + 1] = "no compile yet"
  end
  if st.last_strip then
    parts[#parts + 1] = "last strip " .. st.last_strip.reason
  end
  if st.hit_ratio then
    parts[#parts + 1] = string.format("cache %d%%", math.floor(st.hit_ratio * 100 + 0.5))
  end
  if st.spend_today then
    parts[#parts + 1] = M.money(st.spend_today) .. " today"
  end
  return table.concat(parts, " · ")
end

local function short(id)
  if type(id) ~= "string" then
    return ""
  end
  return id
end

-- event_line is one feed event on one line, for the tail split: time, type,
-- conversation, then what the type says (api/event.go lists the fields).
function M.event_line(ev)
  local time = type(ev.time) == "string" and (ev.time:match("T(%d+:%d+:%d+)") or ev.time) or ""
  local head = string.format("%s %-8s %s", time, ev.type or "?", short(ev.conversation))
  local t = ev.type
  local tail
  if t == "compile" then
    tail = string.format("kept %s stripped %s", tostring(ev.thinkingKept or "?"), tostring(ev.thinkingStripped or 0))
    if ev.cache and ev.cache.cause and ev.cache.cause ~= "none" then
      tail = tail .. " cache " .. ev.cache.cause
    end
  elseif t == "strip" then
    tail = string.format("%s %s (~%s tokens)", tostring(ev.path), tostring(ev.reason), tostring(ev.tokens or "?"))
  elseif t == "accept" then
    tail = string.format("stamped %s released %s", tostring(ev.stamped or 0), tostring(ev.released or 0))
  elseif t == "release" then
    tail = string.format("%s released %s", tostring(ev.path or ev.signature or "?"), tostring(ev.released or 0))
  elseif t == "session" then
    tail = string.format("%s %s entries", tostring(ev.change), tostring(ev.entries or 0))
  elseif t == "ingest-error" then
    tail = string.format("%s line %s: %s", tostring(ev.file), tostring(ev.line), tostring(ev.reason))
  else
    tail = ""
  end
  if tail == "" then
    return head
  end
  return head .. " " .. tail
end

return M
