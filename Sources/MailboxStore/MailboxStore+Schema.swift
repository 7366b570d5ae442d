import SQLiteKit

extension MailboxStore {
    /// The schema, as named, append-only migrations.
    static let migrator: Migrator = {
        var migrator = Migrator()
        migrator.register("001-initial") { db in
            try db.execute(
                """
                CREATE TABLE store_meta (
                    key TEXT PRIMARY KEY NOT NULL,
                    value TEXT NOT NULL
                );
                CREATE TABLE accounts (
                    id INTEGER PRIMARY KEY,
                    username TEXT NOT NULL UNIQUE,
                    password_hash TEXT NOT NULL,
                    modseq INTEGER NOT NULL DEFAULT 0,
                    horizon_modseq INTEGER NOT NULL DEFAULT 0,
                    created_at REAL NOT NULL
                );
                CREATE TABLE sessions (
                    id INTEGER PRIMARY KEY,
                    account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    token_hash BLOB NOT NULL UNIQUE,
                    device_name TEXT NOT NULL,
                    created_at REAL NOT NULL,
                    last_used_at REAL NOT NULL,
                    revoked_at REAL
                );
                CREATE TABLE mailboxes (
                    id INTEGER PRIMARY KEY,
                    account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    role TEXT NOT NULL CHECK (role IN ('inbox', 'archive', 'trash')),
                    name TEXT NOT NULL,
                    UNIQUE (account_id, role)
                );
                CREATE TABLE messages (
                    id INTEGER PRIMARY KEY,
                    public_id TEXT NOT NULL UNIQUE,
                    account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    mailbox_id INTEGER NOT NULL REFERENCES mailboxes(id),
                    from_addr TEXT NOT NULL,
                    to_addr TEXT NOT NULL,
                    subject TEXT NOT NULL,
                    preview TEXT NOT NULL,
                    body TEXT NOT NULL,
                    size INTEGER NOT NULL,
                    received_at REAL NOT NULL,
                    seen INTEGER NOT NULL DEFAULT 0,
                    flagged INTEGER NOT NULL DEFAULT 0,
                    created_modseq INTEGER NOT NULL,
                    modseq INTEGER NOT NULL
                );
                CREATE INDEX messages_by_modseq ON messages (account_id, modseq);
                CREATE INDEX messages_by_mailbox ON messages (mailbox_id, seen);
                CREATE TABLE tombstones (
                    account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    public_id TEXT NOT NULL,
                    created_modseq INTEGER NOT NULL,
                    modseq INTEGER NOT NULL,
                    destroyed_at REAL NOT NULL,
                    PRIMARY KEY (account_id, public_id)
                );
                CREATE INDEX tombstones_by_modseq ON tombstones (account_id, modseq);
                CREATE TABLE devices (
                    id INTEGER PRIMARY KEY,
                    token TEXT NOT NULL UNIQUE,
                    account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    session_id INTEGER REFERENCES sessions(id) ON DELETE SET NULL,
                    topic TEXT NOT NULL,
                    environment TEXT NOT NULL CHECK (environment IN ('sandbox', 'production')),
                    alias TEXT NOT NULL UNIQUE,
                    created_at REAL NOT NULL,
                    updated_at REAL NOT NULL,
                    last_signal_at REAL NOT NULL DEFAULT 0,
                    last_signalled_modseq INTEGER NOT NULL DEFAULT 0
                );
                CREATE INDEX devices_by_account ON devices (account_id);
                CREATE TABLE signal_outbox (
                    device_id INTEGER PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE,
                    modseq INTEGER NOT NULL,
                    due_at REAL NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    next_attempt_at REAL NOT NULL DEFAULT 0,
                    last_error TEXT
                );
                CREATE INDEX signal_outbox_by_due ON signal_outbox (due_at);
                """)
        }
        // A claim's lease has its own column, apart from the retry time, so a restarted dispatcher can end the
        // leases its dead predecessor held without cutting any retry backoff short.
        migrator.register("002-outbox-leases") { db in
            try db.execute("ALTER TABLE signal_outbox ADD COLUMN leased_until REAL NOT NULL DEFAULT 0")
        }
        // Mail with its MIME structure: the header fields clients show, the attachments' descriptions, the HTML
        // body, and the raw message as a content-addressed blob (SHA-256 of the bytes). `ingest_key` makes an MTA's
        // retransmission of the same message to the same account a no-op.
        migrator.register("003-mime") { db in
            try db.execute(
                """
                CREATE TABLE blobs (
                    hash TEXT PRIMARY KEY NOT NULL,
                    bytes BLOB NOT NULL
                );
                ALTER TABLE messages ADD COLUMN message_id TEXT;
                ALTER TABLE messages ADD COLUMN in_reply_to TEXT;
                ALTER TABLE messages ADD COLUMN to_json TEXT NOT NULL DEFAULT '[]';
                ALTER TABLE messages ADD COLUMN cc_json TEXT NOT NULL DEFAULT '[]';
                ALTER TABLE messages ADD COLUMN sent_at REAL;
                ALTER TABLE messages ADD COLUMN attachments_json TEXT NOT NULL DEFAULT '[]';
                ALTER TABLE messages ADD COLUMN html_body TEXT;
                ALTER TABLE messages ADD COLUMN blob_hash TEXT;
                ALTER TABLE messages ADD COLUMN ingest_key TEXT;
                CREATE INDEX messages_by_blob ON messages (blob_hash) WHERE blob_hash IS NOT NULL;
                CREATE UNIQUE INDEX messages_by_ingest_key ON messages (account_id, ingest_key)
                    WHERE ingest_key IS NOT NULL;
                """)
        }
        // Per-device signal pacing (`SignalPacing`): the bucket's tokens (NULL: full, never signalled) and when they
        // were counted.
        migrator.register("004-signal-pacing") { db in
            try db.execute(
                """
                ALTER TABLE devices ADD COLUMN pace_tokens REAL;
                ALTER TABLE devices ADD COLUMN pace_at REAL NOT NULL DEFAULT 0;
                """)
        }
        return migrator
    }()
}
