-- common.lua — shared by the bench/api wrk scripts (loaded with dofile).
-- Environment (set by bench/api/run):
--   BENCH_TOKEN   bearer token for droverd (absent for the nginx scenario)
--   BENCH_RESULT  file that done() writes one machine-readable line to
--   BENCH_WRK_REQUESTS  (smoke mode, bench/smoke.sh) the run ends when a
--                 thread has had that many responses (-d is then only a
--                 bound): the thread stops, and wrk itself gets the SIGINT
--                 that ends a run early (its handler does what the end of -d
--                 does; the other threads stop within wrk's 100 ms tick).
--                 Unset, no response() is defined (wrk then hands no response
--                 to Lua) and every run lasts its -d: the full run is as it was.
-- done() writes: requests duration_us p50_us p99_us non2xx connect read write timeout
-- (the same numbers wrk prints: "Requests/sec", the --latency distribution,
-- "Non-2xx or 3xx responses" and "Socket errors").

local token = os.getenv("BENCH_TOKEN")
bench_headers = {}
if token and token ~= "" then
   bench_headers["Authorization"] = "Bearer " .. token
end

local cap = tonumber(os.getenv("BENCH_WRK_REQUESTS") or "")
if cap and cap > 0 then
   local seen = 0
   function response()
      seen = seen + 1
      if seen == cap then
         -- io.popen's shell is wrk's child, so $PPID is wrk (os.execute's
         -- system() would ignore SIGINT while it waits, losing the signal)
         local sh = io.popen("kill -INT $PPID")
         sh:close()
         wrk.thread:stop()
      end
   end
end

function done(summary, latency, requests)
   local out = os.getenv("BENCH_RESULT")
   local e = summary.errors
   local line = string.format("%d %d %d %d %d %d %d %d %d\n",
      summary.requests, summary.duration,
      latency:percentile(50.0), latency:percentile(99.0),
      e.status, e.connect, e.read, e.write, e.timeout)
   if out and out ~= "" then
      local f = assert(io.open(out, "w"))
      f:write(line)
      f:close()
   else
      io.write("RESULT " .. line)
   end
end
