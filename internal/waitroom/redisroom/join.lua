
-- Join: ARGV[2] is the buyer. A buyer in line, or admitted with its session running, gets its
-- ticket back (a repeated join, a reload, N racing requests: one ticket). A buyer whose ticket is
-- dead (skipped as abandoned, or its session over) starts again at the back. Before the opening a
-- room that shuffles puts the joiner in the pre-queue without a ticket number yet.
local buyer = ARGV[2]
local tk = redis.call('HGET', KEYS[2], buyer)
if tk then
	tk = tonumber(tk)
	local dead = false
	if tk > 0 and tk <= served then
		local ends = redis.call('ZSCORE', KEYS[6], buyer)
		dead = not ends or tonumber(ends) <= now
	end
	if not dead then
		heard(buyer)
		return answer(buyer, tk)
	end
	redis.call('ZREM', KEYS[6], buyer)
end

issued = issued + 1
if not opened and now < opens and shuffle then
	tk = 0
	redis.call('RPUSH', KEYS[4], buyer)
else
	tk = issued
	redis.call('HSET', KEYS[3], tk, buyer)
end
redis.call('HSET', KEYS[2], buyer, tk)
redis.call('HSET', KEYS[1], 'issued', issued)
heard(buyer)
return answer(buyer, tk)
