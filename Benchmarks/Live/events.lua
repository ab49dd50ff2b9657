-- wrk script for scripts/bench-live: POST /v1/events with batches of unique event ids.
--   wrk -t2 -c64 -d30s -s Benchmarks/Live/events.lua http://127.0.0.1:PORT/v1/events
-- Each wrk thread is one device (DEVICE#SEQUENCE ids, the sequence counting up), so no id repeats
-- within a run; WRK_DEVICE_BASE shifts the device numbers between runs on one data directory.
-- BATCH sets the events per request (default 20, as the scenarios' batch_size). At the end it
-- prints one JSON line for the script that runs it.

local batch = tonumber(os.getenv("BATCH") or "20")
local base = tonumber(os.getenv("WRK_DEVICE_BASE") or "1000000")
local kinds = {"view", "view", "view", "participation", "conversion", "goal"}
local variants = {"control", "green"}
local count = 0

function setup(thread)
   count = count + 1
   thread:set("device", base + count)
end

local headers = {["Content-Type"] = "application/json"}
local sequence = 0

function request()
   local events = {}
   for i = 1, batch do
      sequence = sequence + 1
      local kind = kinds[sequence % #kinds + 1]
      local value = ""
      if kind == "conversion" or kind == "goal" then value = ',"value":4.99' end
      events[i] = string.format('{"id":"%d#%d","kind":"%s","experiment":"checkout-button","variant":"%s","created_at":%d%s}',
         device, sequence, kind, variants[sequence % 2 + 1], 1700000000 + sequence, value)
   end
   return wrk.format("POST", nil, headers, '{"events":[' .. table.concat(events, ",") .. ']}')
end

function done(summary, latency, requests)
   local errors = summary.errors
   io.write(string.format('WRK_RESULT {"requests":%d,"duration_us":%d,"bytes":%d,"non_2xx":%d,"connect_errors":%d,"read_errors":%d,"write_errors":%d,"timeouts":%d,"batch":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"p999_us":%d,"max_us":%d}\n',
      summary.requests, summary.duration, summary.bytes, errors.status, errors.connect, errors.read, errors.write, errors.timeout, batch,
      latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9), latency.max))
end
