-- The return of `redis-lua` (issue #14): the units of closed orders (expired or cancelled) go back
-- into the sale's stock, each order once, atomically with the purchases the purchase script decides.
--
-- KEYS[1] state     hash: epoch, stock, ... gen (see purchase.lua)
-- KEYS[2] returned  set: the orders of this epoch whose units are back in stock
-- KEYS[3] stream    the sale's stream: per order returned now one entry, one field, ret =
--                          "order_id user_id quantity epoch gen", for the persister to write to MySQL
-- ARGV    epoch, then per order: order id, user id, quantity
--
-- Replies {'not_loaded'} or {'stale_epoch', epoch}, else {'returned', units returned now}. An order
-- in the set already counts for nothing, so a return repeated (the expirer's next round, before the
-- persister marked the order returned in MySQL) returns nothing twice. The buyer keeps its entry in
-- the buyers hash: a buyer whose order expired or was cancelled may not buy the same sale again.
local st = redis.call('HMGET', KEYS[1], 'epoch', 'gen')
local epoch = st[1]
if not epoch then
	return { 'not_loaded' }
end
if epoch ~= ARGV[1] then
	return { 'stale_epoch', epoch }
end

local gen = st[2] or '0'
local units = 0
for i = 2, #ARGV, 3 do
	local order, user, qty = ARGV[i], ARGV[i + 1], ARGV[i + 2]
	if redis.call('SADD', KEYS[2], order) == 1 then
		units = units + tonumber(qty)
		redis.call('XADD', KEYS[3], '*', 'ret', order .. ' ' .. user .. ' ' .. qty .. ' ' .. epoch .. ' ' .. gen)
	end
end

if units > 0 then
	redis.call('HINCRBY', KEYS[1], 'stock', units)
end
return { 'returned', tostring(units) }
