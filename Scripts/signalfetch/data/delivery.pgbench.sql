-- The same transaction shape as a delivery, in PostgreSQL's own client: lock the account row and take its next
-- modseq, insert the message, bump the modseq, upsert the account's devices' outbox rows.
\set account random(1, :accounts)
BEGIN;
SELECT modseq FROM accounts WHERE id = :account FOR UPDATE;
INSERT INTO messages (public_id, account_id, mailbox_id, from_addr, to_addr, subject, preview, body, size,
    received_at, created_modseq, modseq)
    SELECT md5(random()::text), :account, b.id, 'bench@example.com', 'user', 'Scale', 'A short body',
        'A short body for the message.', 29, extract(epoch FROM now()), a.modseq + 1, a.modseq + 1
    FROM accounts a JOIN mailboxes b ON b.account_id = a.id AND b.role = 'inbox' WHERE a.id = :account;
UPDATE accounts SET modseq = modseq + 1 WHERE id = :account;
INSERT INTO signal_outbox (device_id, modseq, due_at)
    SELECT d.id, a.modseq, extract(epoch FROM now()) FROM devices d JOIN accounts a ON a.id = d.account_id
    WHERE d.account_id = :account
    ON CONFLICT (device_id) DO UPDATE SET modseq = greatest(signal_outbox.modseq, excluded.modseq);
END;
