-- The whole decision of a `redis-lua` purchase, atomic because Redis runs one script at a time.
--
-- KEYS[1] state    hash: epoch, stock, limit, initial
-- KEYS[2] buyers   hash: user id -> units bought in this epoch
-- KEYS[3] receipts hash: "user_id Idempotency-Key" -> "order_id user_id quantity" (a key is
--                         scoped per buyer, as in MySQL)
-- KEYS[4] stream   the accepted reservations, for the persister
-- ARGV    epoch, user id, quantity, Idempotency-Key ("" for none), new order id
--
-- Replies {result, detail}: accepted/left, replayed/receipt, limit_reached, sold_out/left,
-- not_loaded, stale_epoch/epoch. A key seen before answers as it did the first time, whatever the
-- stock is now; a buyer who bought already is told so before being told the sale is sold out.
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if not epoch then
	return { 'not_loaded' }
end
if epoch ~= ARGV[1] then
	return { 'stale_epoch', epoch }
end

local user, key, order = ARGV[2], ARGV[4], ARGV[5]
local qty = tonumber(ARGV[3])

if key ~= '' then
	local receipt = redis.call('HGET', KEYS[3], user .. ' ' .. key)
	if receipt then
		return { 'replayed', receipt }
	end
end

local limit = tonumber(redis.call('HGET', KEYS[1], 'limit'))
if redis.call('HEXISTS', KEYS[2], user) == 1 or (limit > 0 and qty > limit) then
	return { 'limit_reached' }
end

local left = tonumber(redis.call('HGET', KEYS[1], 'stock'))
if left < qty then
	return { 'sold_out', tostring(left) }
end

left = redis.call('HINCRBY', KEYS[1], 'stock', -qty)
redis.call('HSET', KEYS[2], user, qty)
if key ~= '' then
	redis.call('HSET', KEYS[3], user .. ' ' .. key, order .. ' ' .. user .. ' ' .. qty)
end
redis.call('XADD', KEYS[4], '*', 'order', order, 'user', user, 'qty', qty, 'key', key, 'epoch', epoch)
return { 'accepted', tostring(left) }
