-- A mailbox of :size messages for :'user' (psql -v user=… -v size=… -v prefix=…), for the changes-latency figure.
INSERT INTO messages (public_id, account_id, mailbox_id, from_addr, to_addr, subject, preview, body,
    size, received_at, seen, created_modseq, modseq)
SELECT :'prefix' || i, a.id, b.id, 'a@example.com', :'user', 'Subject ' || i, 'preview',
    'body', 4, 1700000000 + i, 1, i, i
FROM accounts a JOIN mailboxes b ON b.account_id = a.id AND b.role = 'inbox',
    generate_series(1, :size) AS i
WHERE a.username = :'user';
UPDATE accounts SET modseq = :size WHERE username = :'user';
ANALYZE messages;
