/**
 * The driver's Lua scripts: each write checks its fence (the lock's `<owner> <epoch>` still in
 * the lock key) in the same script as the write, so a holder taken over changes nothing. All
 * keys of a script share the queue's hash tag (redis-keys.ts). Replies are `{status, value}`.
 */

/** Statuses of a write script. */
export const OK = 1;
export const FENCED = -1;
/** An append not at the log's end (`value`: the end). */
export const NOT_AT_END = -2;
/** The file was removed (a queue deleted under a stale handle). */
export const MISSING = -3;

// KEYS[1] the lock of the fence (or any key of the slot), ARGV[1] the fence's token or "".
// Refused: the value is the holder's epoch now, or 0 when the lock key is gone (its lease expired).
const FENCE = `
if ARGV[1] ~= '' then
  local held = redis.call('GET', KEYS[1])
  if held ~= ARGV[1] then return {${FENCED}, held and (tonumber(string.match(held, ' (%d+)$')) or -1) or 0} end
end
`;

export const SCRIPTS = {
  /** KEYS: lock, file. ARGV: token, at, data, channel. */
  vqAppend: {
    keys: 2,
    lua: `${FENCE}
if redis.call('EXISTS', KEYS[2]) == 0 then return {${MISSING}, 0} end
local size = redis.call('STRLEN', KEYS[2])
if size ~= tonumber(ARGV[2]) then return {${NOT_AT_END}, size} end
local now = redis.call('APPEND', KEYS[2], ARGV[3])
redis.call('PUBLISH', ARGV[4], '')
return {${OK}, now}`,
  },
  /** KEYS: lock, file. ARGV: token, length. Cuts (or pads with zeros) the log to `length`. */
  vqTruncate: {
    keys: 2,
    lua: `${FENCE}
if redis.call('EXISTS', KEYS[2]) == 0 then return {${MISSING}, 0} end
local size = redis.call('STRLEN', KEYS[2])
local length = tonumber(ARGV[2])
if length == 0 then redis.call('SET', KEYS[2], '')
elseif length < size then redis.call('SET', KEYS[2], redis.call('GETRANGE', KEYS[2], 0, length - 1))
elseif length > size then redis.call('SETRANGE', KEYS[2], length - 1, '\\0') end
return {${OK}, length}`,
  },
  /**
   * KEYS: lock, file, files. ARGV: token, data, channel, path, create ("1": make it if missing,
   * as writeAtomic does; else a missing file is refused). `value` is 1 when the file is new.
   */
  vqReplace: {
    keys: 3,
    lua: `${FENCE}
local new = 0
if redis.call('EXISTS', KEYS[2]) == 0 then
  if ARGV[5] ~= '1' then return {${MISSING}, 0} end
  new = redis.call('SADD', KEYS[3], ARGV[4])
end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('PUBLISH', ARGV[3], '')
return {${OK}, new}`,
  },
  /** KEYS: file, files. ARGV: path. Makes an empty file if missing; 1 when made. */
  vqCreate: {
    keys: 2,
    lua: `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], '')
redis.call('SADD', KEYS[2], ARGV[1])
return 1`,
  },
  /** KEYS: files. ARGV: lock key prefix. The names, less the locks whose lease ran out (dropped). */
  vqList: {
    keys: 1,
    lua: `
local out = {}
for _, name in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if string.sub(name, -5) == '.lock' and redis.call('EXISTS', ARGV[1] .. name) == 0 then
    redis.call('SREM', KEYS[1], name)
  else
    table.insert(out, name)
  end
end
return out`,
  },
  /** KEYS: lock, files. ARGV: token, path, file key prefix. Removes the file or directory tree; the names left. */
  vqRemove: {
    keys: 2,
    lua: `${FENCE}
local path = ARGV[2]
local under = path .. '/'
for _, name in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if name == path or name == under or string.sub(name, 1, #under) == under then
    -- A lock stays: its holder (a delete) releases it.
    if string.sub(name, -5) ~= '.lock' then
      redis.call('DEL', ARGV[3] .. name)
      redis.call('SREM', KEYS[2], name)
    end
  end
end
redis.call('DEL', ARGV[3] .. path)
return {${OK}, redis.call('SCARD', KEYS[2])}`,
  },
  /** KEYS: lock, epoch, files. ARGV: owner, lease ms, path. The new epoch, or 0 when held. */
  vqLock: {
    keys: 3,
    lua: `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local epoch = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. epoch, 'PX', ARGV[2])
redis.call('SADD', KEYS[3], ARGV[3])
return epoch`,
  },
  /** KEYS: lock. ARGV: token, lease ms. 1 when still ours (lease renewed), 0 when gone (its lease ran out), else the other holder's `<owner> <epoch>`. */
  vqRefresh: {
    keys: 1,
    lua: `
local held = redis.call('GET', KEYS[1])
if not held then return 0 end
if held ~= ARGV[1] then return held end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`,
  },
  /** KEYS: lock, files. ARGV: token, path. Frees the lock if still ours. */
  vqUnlock: {
    keys: 2,
    lua: `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[2])
return 1`,
  },
} as const;

export type ScriptName = keyof typeof SCRIPTS;
