-- create.lua — POST /v1/models with a unique id per request:
-- "<BENCH_ID_PREFIX><thread>-<n>" (a counter per wrk thread; the prefix keeps
-- a warm-up run's ids apart from the measured run's). Every 201 means the
-- row is committed (droverd answers writes only once they are durable).
dofile(os.getenv("BENCH_LUA_DIR") .. "/common.lua")

local prefix = os.getenv("BENCH_ID_PREFIX") or "b"
local next_tid = 1

function setup(thread)
   thread:set("tid", next_tid)
   next_tid = next_tid + 1
end

local counter = 0
local headers = {}

function init(args)
   for k, v in pairs(bench_headers) do
      headers[k] = v
   end
   headers["Content-Type"] = "application/json"
end

function request()
   counter = counter + 1
   local body = string.format(
      '{"id":"%s%d-%d","runtime":{"command":["true"]},"resources":{"gpu":{"count":1,"memory_mib":4096}}}',
      prefix, tid, counter)
   return wrk.format("POST", "/v1/models", headers, body)
end
