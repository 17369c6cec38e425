
-- Admit: ARGV[2] is the most tickets one call may walk past. The serving counter moves on by
-- as many admissions as three bounds allow, the least of them:
--   the rate:     at most rate * (now - start) admissions since start (the opening, or the last
--                 change of the rate, whichever came later), and never more than a second's worth
--                 at once after a lull (used is moved up to keep that burst);
--   the sessions: at most max sessions unexpired at once;
--   sold out:     only the returned units not yet admitted (credit).
-- On its way it skips the tickets of buyers not heard from for longer than abandon before the
-- newest heartbeat of anyone in line (beat), and those skips count against no bound but the
-- walk's. Against the newest heartbeat rather than now: when nobody could poll (Redis or every
-- replica down, a clock that jumped), nobody is taken for gone. (After such a silence, those
-- heard before it must poll within abandon of the first one heard after it.)
--
-- Replies { 'admitted', now, served, skipped, more (1: the walk's bound stopped it with
-- admissions left), buyers admitted... }, or { 'closed', now, served } before the opening.
if now < opens then
	return { 'closed', now, served }
end
local st = redis.call('HMGET', KEYS[1], 'used', 'beat', 'start')
local used, beat = tonumber(st[1] or '0'), tonumber(st[2] or '0')
local start = math.max(opens, tonumber(st[3] or '0'))
local allowed = math.floor(rate * (now - start) / 1000)
local burst = math.max(1, math.floor(rate))
if allowed - used > burst then
	used = allowed - burst
end
local budget = allowed - used
local live = redis.call('ZCOUNT', KEYS[6], '(' .. now, '+inf')
budget = math.min(budget, maxActive - live)
if soldout then
	budget = math.min(budget, credit)
end

local admitted, skipped, walk = {}, 0, tonumber(ARGV[2])
local cutoff, ends = beat - abandon, now + session
local t = served
while #admitted < budget and t < issued and t - served < walk do
	t = t + 1
	local b = redis.call('HGET', KEYS[3], t)
	redis.call('HDEL', KEYS[3], t)
	if b and tonumber(redis.call('HGET', KEYS[2], b)) == t then
		if tonumber(redis.call('HGET', KEYS[5], b) or '0') >= cutoff then
			redis.call('ZADD', KEYS[6], ends, b)
			admitted[#admitted + 1] = b
		else
			skipped = skipped + 1
		end
	end
end

local more = 0
if #admitted < budget and t < issued then
	more = 1
end
used = used + #admitted
redis.call('HSET', KEYS[1], 'served', t, 'used', used)
if soldout and #admitted > 0 then
	redis.call('HSET', KEYS[1], 'credit', credit - #admitted)
end
local reply = { 'admitted', now, t, skipped, more }
for _, b in ipairs(admitted) do
	reply[#reply + 1] = b
end
return reply
