import SQLSupport

/// One named step of the schema, written out for each engine: SQLite's statements and PostgreSQL's (the same
/// tables with the types spelled its way: 64-bit integers, an identity column for SQLite's rowid, `DOUBLE
/// PRECISION`, `BYTEA`). Both engines record the names they applied, in order, in one bookkeeping shape.
struct StoreMigration: Sendable {
    let name: String
    /// The statements for SQLite.
    let sqlite: String
    /// The statements for PostgreSQL.
    let postgres: String

    /// The migrations `applied` lacks, in order. Throws `.schemaTooNew` when `applied` holds a migration this
    /// build does not know: a newer build upgraded the database, and this one must not write to it.
    static func pending(applied: [String], in migrations: [StoreMigration]) throws -> [StoreMigration] {
        let known = Set(migrations.map(\.name))
        if let unknown = applied.first(where: { !known.contains($0) }) {
            throw MailboxStoreError.schemaTooNew(unknown)
        }
        let done = Set(applied)
        return migrations.filter { !done.contains($0.name) }
    }
}

extension MailboxStore {
    /// The schema, as named, append-only migrations.
    static let migrations: [StoreMigration] = [
        StoreMigration(
            name: "001-initial",
            sqlite: """
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
                """,
            postgres: """
                CREATE TABLE store_meta (
                    key TEXT PRIMARY KEY NOT NULL,
                    value TEXT NOT NULL
                );
                CREATE TABLE accounts (
                    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    username TEXT NOT NULL UNIQUE,
                    password_hash TEXT NOT NULL,
                    modseq BIGINT NOT NULL DEFAULT 0,
                    horizon_modseq BIGINT NOT NULL DEFAULT 0,
                    created_at DOUBLE PRECISION NOT NULL
                );
                CREATE TABLE sessions (
                    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    account_id BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    token_hash BYTEA NOT NULL UNIQUE,
                    device_name TEXT NOT NULL,
                    created_at DOUBLE PRECISION NOT NULL,
                    last_used_at DOUBLE PRECISION NOT NULL,
                    revoked_at DOUBLE PRECISION
                );
                CREATE TABLE mailboxes (
                    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    account_id BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    role TEXT NOT NULL CHECK (role IN ('inbox', 'archive', 'trash')),
                    name TEXT NOT NULL,
                    UNIQUE (account_id, role)
                );
                CREATE TABLE messages (
                    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    public_id TEXT NOT NULL UNIQUE,
                    account_id BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    mailbox_id BIGINT NOT NULL REFERENCES mailboxes(id),
                    from_addr TEXT NOT NULL,
                    to_addr TEXT NOT NULL,
                    subject TEXT NOT NULL,
                    preview TEXT NOT NULL,
                    body TEXT NOT NULL,
                    size BIGINT NOT NULL,
                    received_at DOUBLE PRECISION NOT NULL,
                    seen BIGINT NOT NULL DEFAULT 0,
                    flagged BIGINT NOT NULL DEFAULT 0,
                    created_modseq BIGINT NOT NULL,
                    modseq BIGINT NOT NULL
                );
                CREATE INDEX messages_by_modseq ON messages (account_id, modseq);
                CREATE INDEX messages_by_mailbox ON messages (mailbox_id, seen);
                CREATE TABLE tombstones (
                    account_id BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    public_id TEXT NOT NULL,
                    created_modseq BIGINT NOT NULL,
                    modseq BIGINT NOT NULL,
                    destroyed_at DOUBLE PRECISION NOT NULL,
                    PRIMARY KEY (account_id, public_id)
                );
                CREATE INDEX tombstones_by_modseq ON tombstones (account_id, modseq);
                CREATE TABLE devices (
                    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    token TEXT NOT NULL UNIQUE,
                    account_id BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    session_id BIGINT REFERENCES sessions(id) ON DELETE SET NULL,
                    topic TEXT NOT NULL,
                    environment TEXT NOT NULL CHECK (environment IN ('sandbox', 'production')),
                    alias TEXT NOT NULL UNIQUE,
                    created_at DOUBLE PRECISION NOT NULL,
                    updated_at DOUBLE PRECISION NOT NULL,
                    last_signal_at DOUBLE PRECISION NOT NULL DEFAULT 0,
                    last_signalled_modseq BIGINT NOT NULL DEFAULT 0
                );
                CREATE INDEX devices_by_account ON devices (account_id);
                CREATE TABLE signal_outbox (
                    device_id BIGINT PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE,
                    modseq BIGINT NOT NULL,
                    due_at DOUBLE PRECISION NOT NULL,
                    attempts BIGINT NOT NULL DEFAULT 0,
                    next_attempt_at DOUBLE PRECISION NOT NULL DEFAULT 0,
                    last_error TEXT
                );
                CREATE INDEX signal_outbox_by_due ON signal_outbox (due_at);
                """),
        // A claim's lease has its own column, apart from the retry time, so a restarted dispatcher can end the
        // leases its dead predecessor held without cutting any retry backoff short.
        StoreMigration(
            name: "002-outbox-leases",
            sqlite: "ALTER TABLE signal_outbox ADD COLUMN leased_until REAL NOT NULL DEFAULT 0",
            postgres: "ALTER TABLE signal_outbox ADD COLUMN leased_until DOUBLE PRECISION NOT NULL DEFAULT 0"),
        // Mail with its MIME structure: the header fields clients show, the attachments' descriptions, the HTML
        // body, and the raw message as a content-addressed blob (SHA-256 of the bytes). `ingest_key` makes an MTA's
        // retransmission of the same message to the same account a no-op.
        StoreMigration(
            name: "003-mime",
            sqlite: """
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
                """,
            postgres: """
                CREATE TABLE blobs (
                    hash TEXT PRIMARY KEY NOT NULL,
                    bytes BYTEA NOT NULL
                );
                ALTER TABLE messages ADD COLUMN message_id TEXT;
                ALTER TABLE messages ADD COLUMN in_reply_to TEXT;
                ALTER TABLE messages ADD COLUMN to_json TEXT NOT NULL DEFAULT '[]';
                ALTER TABLE messages ADD COLUMN cc_json TEXT NOT NULL DEFAULT '[]';
                ALTER TABLE messages ADD COLUMN sent_at DOUBLE PRECISION;
                ALTER TABLE messages ADD COLUMN attachments_json TEXT NOT NULL DEFAULT '[]';
                ALTER TABLE messages ADD COLUMN html_body TEXT;
                ALTER TABLE messages ADD COLUMN blob_hash TEXT;
                ALTER TABLE messages ADD COLUMN ingest_key TEXT;
                CREATE INDEX messages_by_blob ON messages (blob_hash) WHERE blob_hash IS NOT NULL;
                CREATE UNIQUE INDEX messages_by_ingest_key ON messages (account_id, ingest_key)
                    WHERE ingest_key IS NOT NULL;
                """),
        // Per-device signal pacing (`SignalPacing`): the bucket's tokens (NULL: full, never signalled) and when they
        // were counted.
        StoreMigration(
            name: "004-signal-pacing",
            sqlite: """
                ALTER TABLE devices ADD COLUMN pace_tokens REAL;
                ALTER TABLE devices ADD COLUMN pace_at REAL NOT NULL DEFAULT 0;
                """,
            postgres: """
                ALTER TABLE devices ADD COLUMN pace_tokens DOUBLE PRECISION;
                ALTER TABLE devices ADD COLUMN pace_at DOUBLE PRECISION NOT NULL DEFAULT 0;
                """),
        // A lease names the process that holds it, so a process that starts again under the same name ends only its
        // own leases, never a live peer's (several processes share a PostgreSQL store).
        StoreMigration(
            name: "005-lease-owner",
            sqlite: "ALTER TABLE signal_outbox ADD COLUMN leased_by TEXT",
            postgres: "ALTER TABLE signal_outbox ADD COLUMN leased_by TEXT"),
        // What processes sharing the store must agree on: each signing key's current APNs provider token (APNs
        // refuses a key's token replaced more often than every 20 minutes, whoever replaces it), and timed events
        // counted against a limit (failed logins, background signals per device).
        StoreMigration(
            name: "006-shared-state",
            sqlite: """
                CREATE TABLE provider_tokens (
                    key TEXT PRIMARY KEY NOT NULL,
                    token TEXT NOT NULL,
                    issued_at REAL NOT NULL
                );
                CREATE TABLE rate_events (
                    key TEXT NOT NULL,
                    at REAL NOT NULL
                );
                CREATE INDEX rate_events_by_key ON rate_events (key, at);
                """,
            postgres: """
                CREATE TABLE provider_tokens (
                    key TEXT PRIMARY KEY NOT NULL,
                    token TEXT NOT NULL,
                    issued_at DOUBLE PRECISION NOT NULL
                );
                CREATE TABLE rate_events (
                    key TEXT NOT NULL,
                    at DOUBLE PRECISION NOT NULL
                );
                CREATE INDEX rate_events_by_key ON rate_events (key, at);
                """),
        // Push services as peers: a device names its service (`apns` for every device before), its address kept
        // as the service gives it; a random id for the API and a signal key (NULL for devices registered before:
        // their signals carry no state tag). OAuth access tokens shared by every process sending for the store.
        StoreMigration(
            name: "007-push-services",
            sqlite: """
                ALTER TABLE devices ADD COLUMN service TEXT NOT NULL DEFAULT 'apns';
                ALTER TABLE devices ADD COLUMN handle TEXT;
                ALTER TABLE devices ADD COLUMN signal_key TEXT;
                CREATE UNIQUE INDEX devices_by_handle ON devices (handle);
                CREATE TABLE access_tokens (
                    key TEXT PRIMARY KEY NOT NULL,
                    token TEXT NOT NULL,
                    expires_at REAL NOT NULL,
                    refreshing_until REAL NOT NULL DEFAULT 0
                );
                """,
            postgres: """
                ALTER TABLE devices ADD COLUMN service TEXT NOT NULL DEFAULT 'apns';
                ALTER TABLE devices ADD COLUMN handle TEXT;
                ALTER TABLE devices ADD COLUMN signal_key TEXT;
                CREATE UNIQUE INDEX devices_by_handle ON devices (handle);
                CREATE TABLE access_tokens (
                    key TEXT PRIMARY KEY NOT NULL,
                    token TEXT NOT NULL,
                    expires_at DOUBLE PRECISION NOT NULL,
                    refreshing_until DOUBLE PRECISION NOT NULL DEFAULT 0
                );
                """),
        // Web Push subscriptions: the keys each message is encrypted to (`p256dh.auth`), kept with the endpoint.
        StoreMigration(
            name: "008-push-keys",
            sqlite: "ALTER TABLE devices ADD COLUMN push_keys TEXT NOT NULL DEFAULT '';",
            postgres: "ALTER TABLE devices ADD COLUMN push_keys TEXT NOT NULL DEFAULT '';"),
        // A device is an account's registration of a token: the same token under two accounts is two devices, so
        // one account cannot take over (and silence) a token another registered. SQLite cannot drop a column's
        // UNIQUE, so its table is rebuilt (the outbox rows set aside and put back); sessions get the index that
        // finds an account's live sessions, least recently used first.
        StoreMigration(
            name: "009-devices-per-account",
            sqlite: """
                CREATE INDEX sessions_by_account ON sessions (account_id, last_used_at);
                CREATE TEMP TABLE outbox_kept AS SELECT * FROM signal_outbox;
                DELETE FROM signal_outbox;
                CREATE TABLE devices_per_account (
                    id INTEGER PRIMARY KEY,
                    token TEXT NOT NULL,
                    account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    session_id INTEGER REFERENCES sessions(id) ON DELETE SET NULL,
                    topic TEXT NOT NULL,
                    environment TEXT NOT NULL CHECK (environment IN ('sandbox', 'production')),
                    alias TEXT NOT NULL UNIQUE,
                    created_at REAL NOT NULL,
                    updated_at REAL NOT NULL,
                    last_signal_at REAL NOT NULL DEFAULT 0,
                    last_signalled_modseq INTEGER NOT NULL DEFAULT 0,
                    pace_tokens REAL,
                    pace_at REAL NOT NULL DEFAULT 0,
                    service TEXT NOT NULL DEFAULT 'apns',
                    handle TEXT,
                    signal_key TEXT,
                    push_keys TEXT NOT NULL DEFAULT ''
                );
                INSERT INTO devices_per_account (id, token, account_id, session_id, topic, environment, alias,
                    created_at, updated_at, last_signal_at, last_signalled_modseq, pace_tokens, pace_at, service,
                    handle, signal_key, push_keys)
                SELECT id, token, account_id, session_id, topic, environment, alias, created_at, updated_at,
                    last_signal_at, last_signalled_modseq, pace_tokens, pace_at, service, handle, signal_key,
                    push_keys
                FROM devices;
                DROP TABLE devices;
                ALTER TABLE devices_per_account RENAME TO devices;
                CREATE UNIQUE INDEX devices_by_account_token ON devices (account_id, token);
                CREATE UNIQUE INDEX devices_by_handle ON devices (handle);
                INSERT INTO signal_outbox SELECT * FROM outbox_kept;
                DROP TABLE outbox_kept;
                """,
            postgres: """
                CREATE INDEX sessions_by_account ON sessions (account_id, last_used_at);
                ALTER TABLE devices DROP CONSTRAINT devices_token_key;
                CREATE UNIQUE INDEX devices_by_account_token ON devices (account_id, token);
                DROP INDEX devices_by_account;
                """),
        // Every process sharing the store, as it last reported itself: for the console's cluster view (each
        // instance's console shows every instance and what it sent, from here, not from its own process alone).
        StoreMigration(
            name: "010-instances",
            sqlite: """
                CREATE TABLE instances (
                    id TEXT PRIMARY KEY NOT NULL,
                    started_at REAL NOT NULL,
                    seen_at REAL NOT NULL,
                    changes INTEGER NOT NULL DEFAULT 0,
                    signals_sent INTEGER NOT NULL DEFAULT 0,
                    signals_failed INTEGER NOT NULL DEFAULT 0
                );
                """,
            postgres: """
                CREATE TABLE instances (
                    id TEXT PRIMARY KEY NOT NULL,
                    started_at DOUBLE PRECISION NOT NULL,
                    seen_at DOUBLE PRECISION NOT NULL,
                    changes BIGINT NOT NULL DEFAULT 0,
                    signals_sent BIGINT NOT NULL DEFAULT 0,
                    signals_failed BIGINT NOT NULL DEFAULT 0
                );
                """),
        // JMAP push subscriptions (RFC 8620 §7.2): a push-service URL an account's client chose, the keys its
        // messages are encrypted to, the verification code sent to it, and which types it wants; tied to the
        // session whose token made it (gone with it), or to the password when Basic credentials made it.
        StoreMigration(
            name: "011-push-subscriptions",
            sqlite: """
                CREATE TABLE push_subscriptions (
                    id TEXT PRIMARY KEY NOT NULL,
                    account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    session_id INTEGER REFERENCES sessions(id) ON DELETE CASCADE,
                    device_client_id TEXT NOT NULL,
                    url TEXT NOT NULL,
                    push_keys TEXT NOT NULL DEFAULT '',
                    verification_code TEXT NOT NULL,
                    verified INTEGER NOT NULL DEFAULT 0,
                    types TEXT,
                    expires_at REAL NOT NULL,
                    created_at REAL NOT NULL
                );
                CREATE INDEX push_subscriptions_by_account ON push_subscriptions (account_id);
                """,
            postgres: """
                CREATE TABLE push_subscriptions (
                    id TEXT PRIMARY KEY NOT NULL,
                    account_id BIGINT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    session_id BIGINT REFERENCES sessions(id) ON DELETE CASCADE,
                    device_client_id TEXT NOT NULL,
                    url TEXT NOT NULL,
                    push_keys TEXT NOT NULL DEFAULT '',
                    verification_code TEXT NOT NULL,
                    verified BIGINT NOT NULL DEFAULT 0,
                    types TEXT,
                    expires_at DOUBLE PRECISION NOT NULL,
                    created_at DOUBLE PRECISION NOT NULL
                );
                CREATE INDEX push_subscriptions_by_account ON push_subscriptions (account_id);
                """),
        // The last delivery to an account (JMAP's Thread and EmailDelivery states, read on every event-stream
        // wake-up and push) in one index step, not a walk over the account's messages.
        StoreMigration(
            name: "012-messages-by-created",
            sqlite: "CREATE INDEX messages_by_created ON messages (account_id, created_modseq);",
            postgres: "CREATE INDEX messages_by_created ON messages (account_id, created_modseq);"),
        // IMAP's per-mailbox UID: the account's modseq at which the message entered its mailbox (its delivery, or
        // its move). The modseq only grows and each change has its own, so UIDs ascend in every mailbox without a
        // counter of their own, allocated in the transaction of the change on both engines. `uid_next` is one past
        // the highest UID the mailbox ever gave (UIDNEXT, which changes only when a message arrives).
        StoreMigration(
            name: "013-imap-uids",
            sqlite: """
                ALTER TABLE messages ADD COLUMN uid INTEGER;
                UPDATE messages SET uid = created_modseq;
                CREATE INDEX messages_by_uid ON messages (mailbox_id, uid);
                ALTER TABLE mailboxes ADD COLUMN uid_next INTEGER NOT NULL DEFAULT 1;
                UPDATE mailboxes SET uid_next = coalesce((SELECT max(uid) + 1 FROM messages
                                                          WHERE messages.mailbox_id = mailboxes.id), 1);
                """,
            postgres: """
                ALTER TABLE messages ADD COLUMN uid BIGINT;
                UPDATE messages SET uid = created_modseq;
                CREATE INDEX messages_by_uid ON messages (mailbox_id, uid);
                ALTER TABLE mailboxes ADD COLUMN uid_next BIGINT NOT NULL DEFAULT 1;
                UPDATE mailboxes SET uid_next = coalesce((SELECT max(uid) + 1 FROM messages
                                                          WHERE messages.mailbox_id = mailboxes.id), 1);
                """),
        // JMAP pushes owed, kept with each subscription as signals are kept in the outbox: `told_modseq` is the account
        // state it was last told of, so a subscription whose account moved past it is owed a StateChange — after a
        // crash too, with no queue row that a crash could lose — and the attempts, retry time, lease and pacing
        // (the signals' token bucket) are those of the outbox. Existing subscriptions start from their account's state now.
        StoreMigration(
            name: "014-jmap-push-queue",
            sqlite: """
                ALTER TABLE push_subscriptions ADD COLUMN told_modseq INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE push_subscriptions ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE push_subscriptions ADD COLUMN next_attempt_at REAL NOT NULL DEFAULT 0;
                ALTER TABLE push_subscriptions ADD COLUMN leased_until REAL NOT NULL DEFAULT 0;
                ALTER TABLE push_subscriptions ADD COLUMN leased_by TEXT;
                ALTER TABLE push_subscriptions ADD COLUMN pace_tokens REAL;
                ALTER TABLE push_subscriptions ADD COLUMN pace_at REAL NOT NULL DEFAULT 0;
                UPDATE push_subscriptions SET told_modseq = (SELECT modseq FROM accounts
                                                             WHERE accounts.id = push_subscriptions.account_id);
                """,
            postgres: """
                ALTER TABLE push_subscriptions ADD COLUMN told_modseq BIGINT NOT NULL DEFAULT 0;
                ALTER TABLE push_subscriptions ADD COLUMN attempts BIGINT NOT NULL DEFAULT 0;
                ALTER TABLE push_subscriptions ADD COLUMN next_attempt_at DOUBLE PRECISION NOT NULL DEFAULT 0;
                ALTER TABLE push_subscriptions ADD COLUMN leased_until DOUBLE PRECISION NOT NULL DEFAULT 0;
                ALTER TABLE push_subscriptions ADD COLUMN leased_by TEXT;
                ALTER TABLE push_subscriptions ADD COLUMN pace_tokens DOUBLE PRECISION;
                ALTER TABLE push_subscriptions ADD COLUMN pace_at DOUBLE PRECISION NOT NULL DEFAULT 0;
                UPDATE push_subscriptions SET told_modseq = (SELECT modseq FROM accounts
                                                             WHERE accounts.id = push_subscriptions.account_id);
                """),
    ]
}
