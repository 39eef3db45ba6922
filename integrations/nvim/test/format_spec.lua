-- Table tests for bindery.format, run headless:
--   nvim --headless -u NONE --cmd 'set rtp^=integrations/nvim' -c 'luafile integrations/nvim/test/format_spec.lua'
-- Exits 0 when every case holds, 1 (with the failures on stderr) otherwise.
local f = require("bindery.format")
local failures = {}

local function eq(name, got, want)
  if got ~= want then
    failures[#failures + 1] = string.format("%s: got %q, want %q", name, tostring(got), tostring(want))
  end
end

eq("unknown", f.statusline({}), "bindery …")
eq("down", f.statusline({ up = false, session = "s" }), "bindery down")
eq("no session", f.statusline({ up = true }), "bindery: no pi session here")
eq("no compile", f.statusline({ up = true, session = "s" }), "bindery · no compile yet")
eq("full", f.statusline({ up = true, session = "s", kept = 12, stripped = 2,
  last_strip = { reason = "prefix-changed" }, hit_ratio = 0.9649, spend_today = 1.234 }),
  "bindery · kept 12 stripped 2 · last strip prefix-changed · cache 96% · $1.23 today")

eq("money crumb", f.money(0.001), "<$0.01")
eq("money zero", f.money(0), "$0.00")
eq("money nil", f.money(nil), "$?")
eq("plural 1", f.plural(1, "branch", "branches"), "1 branch")
eq("plural 2", f.plural(2, "branch", "branches"), "2 branches")

-- A timestamp maps to the local day: check against os.date of the same
-- instant rather than a fixed zone.
local t = os.time({ year = 2026, month = 12, day = 1, hour = 12, min = 0, sec = 0 })
local utc = os.date("!%Y-%m-%dT%H:%M:%S.000Z", t)
eq("local day", f.local_day(utc), os.date("%Y-%m-%d", t))
eq("not a timestamp", f.local_day("yesterday"), nil)

local today = os.date("!%Y-%m-%dT%H:%M:%S.000Z", os.time())
local total, unpriced = f.spend_on({
  { timestamp = today, cost = 0.5 },
  { timestamp = today, cost = 0.25 },
  { timestamp = today }, -- unpriced: counted apart
  { timestamp = "2001-01-01T12:00:00.000Z", cost = 9 },
}, os.date("%Y-%m-%d"))
eq("spend today", total, 0.75)
eq("unpriced today", unpriced, 1)

eq("compile line", f.event_line({ time = "2026-12-01T21:00:01.5Z", type = "compile", conversation = "c1",
  thinkingKept = 3, thinkingStripped = 1, cache = { cause = "strip" } }),
  "21:00:01 compile  c1 kept 3 stripped 1 cache strip")
eq("strip line", f.event_line({ time = "2026-12-01T21:00:01Z", type = "strip", conversation = "c1",
  path = "messages.1.content.0", reason = "prefix-changed", tokens = 12 }),
  "21:00:01 strip    c1 messages.1.content.0 prefix-changed (~12 tokens)")
eq("other line", f.event_line({ time = "2026-12-01T21:00:01Z", type = "engage", conversation = "c1" }),
  "21:00:01 engage   c1")

if #failures > 0 then
  io.stderr:write(table.concat(failures, "\n"), "\n")
  vim.cmd("cquit 1")
else
  io.stdout:write(string.format("format_spec: all cases pass\n"))
  vim.cmd("qall!")
end
