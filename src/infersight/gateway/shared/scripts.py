"""The Lua scripts behind shared limits: each decision is one atomic script in Redis.

A bucket is a hash ``l`` (level), ``t`` (time), refilled continuously at ``cap`` per
``period`` by Redis's own clock (``TIME``: replicas' clocks never disagree), and set
to expire once it would be full again.
"""

from __future__ import annotations

__all__ = ["ADMIT", "CHARGE", "LEVEL"]

LEVEL = """
if redis.replicate_commands then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local period = tonumber(ARGV[4])
local function level(key, cap)
  local v = redis.call('HMGET', key, 'l', 't')
  local l, ts = tonumber(v[1]), tonumber(v[2])
  if l == nil or ts == nil then return cap end
  return math.min(cap, l + math.max(0, now - ts) * cap / period)
end
local function store(key, cap, l)
  redis.call('HSET', key, 'l', string.format('%.17g', l), 't', string.format('%.6f', now))
  redis.call('PEXPIRE', key, math.ceil((cap - l) * period / cap * 1000) + 1000)
end
"""

#: KEYS rpm, tpm, spend; ARGV rpm, tpm, budget, period ('' = no such limit).
#: Returns {decision, wait seconds, spent dollars}; takes one request when 'ok'. The
#: spend is read only for a key with a budget ('' otherwise).
ADMIT = (
    LEVEL
    + """
local spent = ''
local budget = tonumber(ARGV[3])
if budget ~= nil then
  spent = tonumber(redis.call('GET', KEYS[3]) or '0') or 0
  if spent >= budget then
    return {'budget', '0', tostring(spent)}
  end
  spent = tostring(spent)
end
local tpm = tonumber(ARGV[2])
if tpm ~= nil then
  local tl = level(KEYS[2], tpm)
  if tl <= 0 then
    return {'tokens', tostring((math.min(1, tpm) - tl) * period / tpm), spent}
  end
end
local rpm = tonumber(ARGV[1])
if rpm ~= nil then
  local rl = level(KEYS[1], rpm)
  local need = math.min(1, rpm)
  if rl < need then
    return {'requests', tostring((need - rl) * period / rpm), spent}
  end
  store(KEYS[1], rpm, rl - 1)
end
return {'ok', '0', spent}
"""
)

#: KEYS tpm, spend; ARGV tpm, tokens, dollars, period. Returns the total spent.
CHARGE = (
    LEVEL
    + """
local tpm, n = tonumber(ARGV[1]), tonumber(ARGV[2])
if tpm ~= nil and n > 0 then
  store(KEYS[1], tpm, level(KEYS[1], tpm) - n)
end
if tonumber(ARGV[3]) > 0 then
  return redis.call('INCRBYFLOAT', KEYS[2], ARGV[3])
end
return redis.call('GET', KEYS[2]) or '0'
"""
)
