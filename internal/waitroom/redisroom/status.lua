
-- Status: ARGV[2] is the buyer. A poll is a heartbeat: the buyer is still there.
local buyer = ARGV[2]
local tk = redis.call('HGET', KEYS[2], buyer)
if not tk then
	return answer(buyer, nil)
end
heard(buyer)
return answer(buyer, tonumber(tk))
