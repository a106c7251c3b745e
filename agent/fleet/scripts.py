"""The bus's Lua scripts: each check-and-write happens atomically inside Redis.

The fencing check is the first line of every script that writes for a partition: the caller's
lease value ("<node>|<token>") must still be the partition's lease, or nothing is written (-1).
"""

PUBLISH_IN = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local eid = redis.call('XADD', KEYS[2], '*', 'body', ARGV[3])
redis.call('HSET', KEYS[1], 's', 'accepted', 'sk', ARGV[2], 'e', eid, 't', ARGV[4], 'a', 0, 'p', -1)
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('INCR', KEYS[4])
return 1
"""

# KEYS: lease, reply hash, out stream, message hash, in stream, open set, inbox count, outbox count
# ARGV: expected lease ('' = unfenced), out id, body ('' = no reply), answers ('' = none), in entry id,
#       keep seconds
PUBLISH_OUT = """
if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
if ARGV[4] ~= '' and redis.call('HGET', KEYS[4], 's') ~= 'accepted' then
  -- answered already (by a worker whose run overlapped this one's): one answer per message
  if ARGV[5] ~= '' then
    redis.call('XACK', KEYS[5], 'workers', ARGV[5])
    redis.call('XDEL', KEYS[5], ARGV[5])
  end
  return -2
end
local queued = 0
if ARGV[3] ~= '' and redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('XADD', KEYS[3], '*', 'id', ARGV[2], 'body', ARGV[3])
  redis.call('HSET', KEYS[2], 's', 'pending')
  redis.call('INCR', KEYS[8])
  queued = 1
end
if ARGV[4] ~= '' and redis.call('HGET', KEYS[4], 's') == 'accepted' then
  redis.call('HSET', KEYS[4], 's', 'answered')
  redis.call('EXPIRE', KEYS[4], ARGV[6])
  redis.call('SREM', KEYS[6], ARGV[4])
  redis.call('DECR', KEYS[7])
  if ARGV[5] ~= '' then
    redis.call('XACK', KEYS[5], 'workers', ARGV[5])
    redis.call('XDEL', KEYS[5], ARGV[5])
  end
end
return queued
"""

# KEYS: reply hash, out stream, outbox count; ARGV: status, error, entry id, keep seconds
FINISH_OUT = """
if redis.call('HGET', KEYS[1], 's') == 'pending' then
  redis.call('HSET', KEYS[1], 's', ARGV[1], 'err', ARGV[2])
  redis.call('EXPIRE', KEYS[1], ARGV[4])
  redis.call('DECR', KEYS[3])
end
if ARGV[3] ~= '' then
  redis.call('XACK', KEYS[2], 'delivery', ARGV[3])
  redis.call('XDEL', KEYS[2], ARGV[3])
end
return 1
"""

# KEYS: message hash; ARGV: progress
BEGIN_ATTEMPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local a = tonumber(redis.call('HGET', KEYS[1], 'a') or '0')
local p = tonumber(redis.call('HGET', KEYS[1], 'p') or '-1')
local now = tonumber(ARGV[1])
if p < now then a = 1 else a = a + 1 end
if now > p then p = now end
redis.call('HSET', KEYS[1], 'a', a, 'p', p)
return a
"""
