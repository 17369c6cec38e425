-- The start of every script of a sale's waiting room (issue #32): it reads the room, reads the
-- clock, and opens the room if its opening has come. join.lua, status.lua and admit.lua follow it
-- in one script each, so that what they decide is atomic with it.
--
-- KEYS[1] meta     hash: the settings (opens, shuffle, rate, max, session, abandon: ms and per
--                        second) and the counters: issued (tickets handed out), served (the serving
--                        counter: every ticket up to it was admitted or skipped), opened, seed (of
--                        the shuffle), soldout, credit (returned units not yet admitted), start
--                        and used (the rate's count: admissions since start), clock (the latest
--                        time the room read), beat (the latest time anyone in line was heard from)
-- KEYS[2] tickets  hash: buyer -> ticket; 0 while in a pre-queue the opening shuffles
-- KEYS[3] line     hash: ticket -> buyer, for the tickets the serving counter has not passed
-- KEYS[4] pre      list: the pre-queue the opening shuffles, in order of joining
-- KEYS[5] seen     hash: buyer -> when it was last heard from (ms)
-- KEYS[6] active   sorted set: admitted buyer -> the end of its session (ms)
-- ARGV[1]          a random seed, used by the call that shuffles the pre-queue, if this one does
--
-- Every time is Redis's (TIME, in ms), never a replica's: the replicas' clocks may disagree, the
-- room's one clock does not. It never runs backwards either: a failover to a replica whose clock
-- is behind leaves the room's time standing (clock) until the new master's catches up, as the
-- fencing tokens do (ARCHITECTURE.md, invariant 4).
local m = redis.call('HMGET', KEYS[1], 'opens', 'shuffle', 'rate', 'max', 'session', 'abandon',
	'issued', 'served', 'opened', 'soldout', 'credit', 'clock')
if not m[1] then
	return { 'no_room' }
end
local opens, shuffle, rate = tonumber(m[1]), m[2] == '1', tonumber(m[3])
local maxActive, session, abandon = tonumber(m[4]), tonumber(m[5]), tonumber(m[6])
local issued, served, opened = tonumber(m[7] or '0'), tonumber(m[8] or '0'), m[9] == '1'
local soldout, credit = m[10] == '1', tonumber(m[11] or '0')

local now
do
	local t = redis.call('TIME')
	now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
	local clock = tonumber(m[12] or '0')
	if now < clock then
		now = clock
	elseif now > clock then
		redis.call('HSET', KEYS[1], 'clock', now)
	end
end

-- The opening, once: the pre-queue gets tickets 1..P (the tickets its joins counted in issued),
-- in a random order drawn from ARGV[1] when the room shuffles (Fisher-Yates; the seed is kept,
-- so that the draw can be replayed on the same Redis version), in order of joining otherwise.
-- The flag is in the same hash as the counters, and Redis runs one script at a time: of all the
-- replicas' calls after the opening, exactly one places the pre-queue.
if not opened and now >= opens then
	local pre = redis.call('LRANGE', KEYS[4], 0, -1)
	if #pre > 1 then
		math.randomseed(tonumber(ARGV[1]))
		for i = #pre, 2, -1 do
			local j = math.random(i)
			pre[i], pre[j] = pre[j], pre[i]
		end
		redis.call('HSET', KEYS[1], 'seed', ARGV[1])
	end
	for i, b in ipairs(pre) do
		redis.call('HSET', KEYS[2], b, i)
		redis.call('HSET', KEYS[3], i, b)
	end
	redis.call('DEL', KEYS[4])
	redis.call('HSET', KEYS[1], 'opened', '1')
	opened = true
end

-- heard notes that buyer is still there (a join or a poll): its own time, and the room's newest.
local function heard(buyer)
	redis.call('HSET', KEYS[5], buyer, now)
	redis.call('HSET', KEYS[1], 'beat', now)
end

-- answer is what buyer, holding ticket tk (nil: none), is told: state, ticket, served, opens,
-- session end, now.
local function answer(buyer, tk)
	if not tk then
		return { 'not_joined', 0, served, opens, 0, now }
	end
	if tk > 0 and tk <= served then
		local ends = redis.call('ZSCORE', KEYS[6], buyer)
		if not ends then
			return { 'abandoned', tk, served, opens, 0, now }
		end
		ends = tonumber(ends)
		if ends > now then
			return { 'admitted', tk, served, opens, ends, now }
		end
		return { 'session_over', tk, served, opens, ends, now }
	end
	-- Sold out for everyone in line but the next `credit`, whom returned units re-admit.
	if soldout and (tk == 0 or tk - served - 1 >= credit) then
		return { 'sold_out', tk, served, opens, 0, now }
	end
	if tk == 0 or now < opens then
		return { 'pre_queue', tk, served, opens, 0, now }
	end
	return { 'waiting', tk, served, opens, 0, now }
end
