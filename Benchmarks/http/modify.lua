-- records/modify: one `create` per request, each of a record name never used before
-- (<run>-<thread>-<n>), so every request is a new durable commit.
-- Usage: wrk ... -s modify.lua URL -- RUN_NAME
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "common.lua")

function request()
  counter = counter + 1
  local body = string.format(
    '{"operations":[{"operationType":"create","record":{"recordName":"%s-%d","recordType":"Bench",' ..
    '"fields":{"title":{"value":"hello, cloudlet"},"n":{"value":%d}}}}]}', prefix, counter, counter)
  return wrk.format("POST", nil, { ["Content-Type"] = "text/plain" }, body)
end
