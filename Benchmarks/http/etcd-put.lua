-- etcd's gateway: one PUT /v3/kv/put per request of a ~200-byte value under a key never used before
-- (<run>-<thread>-<n>), the anchor of cluster.sh.
-- Usage: wrk ... -s etcd-put.lua http://HOST:PORT/v3/kv/put -- RUN_NAME
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "common.lua")

local b64chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function base64(data)
  return ((data:gsub(".", function(x)
    local r, b = "", x:byte()
    for i = 8, 1, -1 do r = r .. (b % 2 ^ i - b % 2 ^ (i - 1) > 0 and "1" or "0") end
    return r
  end) .. "0000"):gsub("%d%d%d?%d?%d?%d?", function(x)
    if #x < 6 then return "" end
    local c = 0
    for i = 1, 6 do c = c + (x:sub(i, i) == "1" and 2 ^ (6 - i) or 0) end
    return b64chars:sub(c + 1, c + 1)
  end) .. ({ "", "==", "=" })[#data % 3 + 1])
end

local value = base64(string.rep("x", 200))

function request()
  counter = counter + 1
  local body = string.format('{"key":"%s","value":"%s"}', base64(prefix .. "-" .. counter), value)
  return wrk.format("POST", nil, { ["Content-Type"] = "application/json" }, body)
end
