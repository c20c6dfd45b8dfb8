-- Loaded by the other scripts: counts failed answers in every wrk thread (a status other than 200, or a 200 that
-- carries a per-record "serverErrorCode") and prints the total as "record errors: N" when the run is done.
threads = {}
errors = 0

function setup(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end

-- Names never used before: the run name (the script's first argument), the thread, a counter (modify.lua,
-- etcd-put.lua; a script that needs another init defines its own after loading this file).
function init(args)
  prefix = (args[1] or "run") .. "-" .. id
  counter = 0
end

function response(status, headers, body)
  if status ~= 200 or body:find('"serverErrorCode"', 1, true) then errors = errors + 1 end
end

function done(summary, latency, requests)
  local e = 0
  for _, t in ipairs(threads) do e = e + t:get("errors") end
  io.write(string.format("record errors: %d\n", e))
end
