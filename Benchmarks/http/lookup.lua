-- records/lookup of one existing record (created by run.sh before the run).
-- Usage: wrk ... -s lookup.lua URL -- RECORD_NAME
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "common.lua")

function init(args)
  body = string.format('{"records":[{"recordName":"%s"}]}', args[1] or "bench-lookup")
end

function request()
  return wrk.format("POST", nil, { ["Content-Type"] = "text/plain" }, body)
end
