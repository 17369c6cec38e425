-- The whole decision of `redis-lua` purchases, atomic because Redis runs one script at a time.
-- One call decides a batch: the purchases of one product that arrived together at one replica
-- (sale.Combiner), one after another, exactly as separate calls would, in one round trip.
--
-- KEYS[1] state    hash: epoch, stock, limit, initial, gen (the state's generation: see
--                         store.ReloadSale)
-- KEYS[2] buyers   hash: user id -> units bought in this epoch
-- KEYS[3] receipts hash: "user_id Idempotency-Key" -> "order_id user_id quantity" (a key is
--                         scoped per buyer, as in MySQL)
-- KEYS[4] stream   the accepted reservations, for the persister
-- ARGV    epoch, then per purchase: user id, quantity, Idempotency-Key ("" for none), new order id
--
-- Replies {'not_loaded'} or {'stale_epoch', epoch} for the whole batch, else {'decided', then per
-- purchase one of: 'accepted <left>', 'replayed <receipt>', 'limit_reached', 'sold_out <left>'}.
-- A key seen before answers as it did the first time, whatever the stock is now; a buyer who
-- bought already is told so before being told the sale is sold out.
local st = redis.call('HMGET', KEYS[1], 'epoch', 'limit', 'stock', 'gen')
local epoch = st[1]
if not epoch then
	return { 'not_loaded' }
end
if epoch ~= ARGV[1] then
	return { 'stale_epoch', epoch }
end

local limit, left, gen = tonumber(st[2]), tonumber(st[3]), st[4] or '0'
local taken = 0
local out = { 'decided' }

for i = 2, #ARGV, 4 do
	local user, qty, key, order = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], ARGV[i + 3]
	local receipt = false
	if key ~= '' then
		receipt = redis.call('HGET', KEYS[3], user .. ' ' .. key)
	end
	if receipt then
		out[#out + 1] = 'replayed ' .. receipt
	elseif redis.call('HEXISTS', KEYS[2], user) == 1 or (limit > 0 and qty > limit) then
		out[#out + 1] = 'limit_reached'
	elseif left < qty then
		out[#out + 1] = 'sold_out ' .. left
	else
		left = left - qty
		taken = taken + qty
		redis.call('HSET', KEYS[2], user, qty)
		if key ~= '' then
			redis.call('HSET', KEYS[3], user .. ' ' .. key, order .. ' ' .. user .. ' ' .. qty)
		end
		redis.call('XADD', KEYS[4], '*', 'order', order, 'user', user, 'qty', qty, 'key', key, 'epoch', epoch, 'gen', gen)
		out[#out + 1] = 'accepted ' .. left
	end
end

if taken > 0 then
	redis.call('HINCRBY', KEYS[1], 'stock', -taken)
end
return out
