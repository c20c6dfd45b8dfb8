-- GET /cloudlet/health: the same server's cheapest route, the framework ceiling (the front end, routing, metrics,
-- access log; no auth, no JSON parsing, no engine).
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "common.lua")
