-- 10 connections, ~100 requests/s each: ~1,000 requests/s.
function delay() return 9 end
