// The mailbox's local copy and its sync, shared by the page (app.js) and the service worker (sw.js, through
// importScripts). Everything lives in IndexedDB because the service worker has no localStorage:
//   "meta"     {key: "session", accessToken, accountId, username}
//              {key: "device", id, alias, signalKey, endpoint, vapidKey}  (the Web Push registration)
//              {key: "state", value}                                      (the state the local copy is at)
//   "messages" the Message objects of GET /v1/messages and /v1/changes, by id.
// Sync follows the server's contract: a full listing (GET /v1/messages) when there is no usable local state,
// then GET /v1/changes?since=STATE until hasMore is false, applied in one local transaction.
'use strict';

const MailSync = (() => {
  const DB_NAME = 'signalfetch-mail';
  const PAGE_SIZE = 1000;    // GET /v1/messages allows 1..1000
  const CHANGES_MAX = 500;   // GET /v1/changes allows 1..5000

  // ---- IndexedDB ----

  let opened = null;
  function openDB() {
    if (!opened) {
      opened = new Promise((resolve, reject) => {
        const request = indexedDB.open(DB_NAME, 1);
        request.onupgradeneeded = () => {
          request.result.createObjectStore('meta', {keyPath: 'key'});
          request.result.createObjectStore('messages', {keyPath: 'id'});
        };
        request.onsuccess = () => resolve(request.result);
        request.onerror = () => { opened = null; reject(request.error); };
      });
    }
    return opened;
  }

  function done(request) {
    return new Promise((resolve, reject) => {
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
  }

  // Runs work(stores) in one transaction over both stores; resolves with work's result once it has committed.
  // work may await requests of this transaction only (any other await would let the transaction commit early).
  async function transaction(mode, work) {
    const db = await openDB();
    return new Promise((resolve, reject) => {
      const tx = db.transaction(['meta', 'messages'], mode);
      let result;
      tx.oncomplete = () => resolve(result);
      tx.onabort = () => reject(tx.error || new Error('transaction aborted'));
      const stores = {meta: tx.objectStore('meta'), messages: tx.objectStore('messages')};
      Promise.resolve(work(stores)).then(value => { result = value; },
                                         error => { reject(error); tx.abort(); });
    });
  }

  const getMeta = key => transaction('readonly', s => done(s.meta.get(key)));
  const putMeta = record => transaction('readwrite', s => done(s.meta.put(record)));
  const deleteMeta = key => transaction('readwrite', s => done(s.meta.delete(key)));
  const allMessages = () => transaction('readonly', s => done(s.messages.getAll()));
  const clear = () => transaction('readwrite', s => Promise.all([done(s.meta.clear()), done(s.messages.clear())]));

  // ---- the API ----

  // An API error: the HTTP status and the server's machine code ({"error","message"}).
  class ApiError extends Error {
    constructor(status, code, message) {
      super(`${status} ${code}: ${message}`);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, {token, body} = {}) {
    const headers = {Accept: 'application/json'};
    if (token) headers.Authorization = `Bearer ${token}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const response = await fetch(path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'omit', cache: 'no-store',
    });
    if (response.status === 204) return null;
    const answer = await response.json().catch(() => ({}));
    if (!response.ok) throw new ApiError(response.status, answer.error || 'httpError', answer.message || '');
    return answer;
  }

  // ---- signal state tags ----

  function base64urlDecode(text) {
    const binary = atob(text.replace(/-/g, '+').replace(/_/g, '/'));
    return Uint8Array.from(binary, c => c.charCodeAt(0));
  }

  function base64urlEncode(bytes) {
    let binary = '';
    for (const byte of new Uint8Array(bytes)) binary += String.fromCharCode(byte);
    return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }

  // TAG = first 16 characters of base64url(HMAC-SHA256(key: signalKey's bytes, message: UTF-8 of the state)).
  async function stateTag(signalKey, state) {
    const key = await crypto.subtle.importKey('raw', base64urlDecode(signalKey), {name: 'HMAC', hash: 'SHA-256'},
                                              false, ['sign']);
    const mac = await crypto.subtle.sign('HMAC', key, new TextEncoder().encode(state));
    return base64urlEncode(mac).slice(0, 16);
  }

  // Whether a signal's tag announces the state the local copy already has.
  async function isCurrent(signalTag) {
    const [device, state] = await Promise.all([getMeta('device'), getMeta('state')]);
    if (!device || !state || typeof signalTag !== 'string') return false;
    return (await stateTag(device.signalKey, state.value)) === signalTag;
  }

  // ---- sync ----

  // The whole mailbox, page by page. Its state is the first page's: changes made while the later pages were read
  // come again in the delta sync that follows.
  async function fetchAll(token) {
    const messages = new Map();
    let state = null;
    let cursor = null;
    do {
      const query = `limit=${PAGE_SIZE}` + (cursor ? `&cursor=${encodeURIComponent(cursor)}` : '');
      const page = await api('GET', `/v1/messages?${query}`, {token});
      if (state === null) state = page.state;
      for (const message of page.messages) messages.set(message.id, message);
      cursor = page.nextCursor;
    } while (cursor);
    return {replace: true, upserts: messages, destroyed: new Set(), newState: state};
  }

  // Every change since a state, until hasMore is false; later pages win over earlier ones.
  async function fetchChanges(token, since) {
    const upserts = new Map();
    const destroyed = new Set();
    let state = since;
    for (;;) {
      const page = await api('GET', `/v1/changes?since=${encodeURIComponent(state)}&max=${CHANGES_MAX}`, {token});
      for (const message of [...page.created, ...page.updated]) {
        upserts.set(message.id, message);
        destroyed.delete(message.id);
      }
      for (const id of page.destroyed) {
        upserts.delete(id);
        destroyed.add(id);
      }
      state = page.newState;
      if (!page.hasMore) break;
    }
    return {replace: false, upserts, destroyed, newState: state};
  }

  // Applies a fetched result in one transaction, only if the local state is still the one it was fetched from
  // (the page and the service worker may both sync; the loser starts again from the winner's state).
  function commit(since, result) {
    return transaction('readwrite', async s => {
      const current = await done(s.meta.get('state'));
      if ((current ? current.value : null) !== since) return null;
      let createdUnseen = 0;
      if (result.replace) s.messages.clear();
      for (const message of result.upserts.values()) {
        if (!result.replace && !message.seen && !(await done(s.messages.getKey(message.id)))) createdUnseen += 1;
        s.messages.put(message);
      }
      for (const id of result.destroyed) s.messages.delete(id);
      s.meta.put({key: 'state', value: result.newState});
      return {state: result.newState, createdUnseen};
    });
  }

  // One sync to the server's current state. Resolves {state, createdUnseen}, or null when signed out.
  async function syncOnce() {
    let createdUnseen = 0;
    for (let round = 0; round < 5; round += 1) {
      const session = await getMeta('session');
      if (!session) return null;
      const stored = await getMeta('state');
      const since = stored ? stored.value : null;
      let result = null;
      if (since) {
        try {
          result = await fetchChanges(session.accessToken, since);
        } catch (error) {
          if (!(error instanceof ApiError && error.code === 'cannotCalculateChanges')) throw error;
          console.info('mail sync: the server cannot calculate changes from the local state; reloading');
        }
      }
      if (!result) result = await fetchAll(session.accessToken);
      const applied = await commit(since, result);
      if (!applied) continue;                 // another context synced meanwhile: go on from its state
      createdUnseen += applied.createdUnseen;
      if (result.replace) continue;           // catch up on what changed while the listing was read
      return {state: applied.state, createdUnseen};
    }
    throw new Error('mail sync did not settle');
  }

  // Serialises syncs across the page and the service worker where Web Locks exist (commit() is correct without).
  function locked(work) {
    const locks = self.navigator && self.navigator.locks;
    return locks ? locks.request('signalfetch-mail-sync', work) : work();
  }

  // Concurrent triggers collapse into one running sync plus one follow-up: a trigger during a sync is answered
  // by the follow-up, which starts when the running one ends and sees everything the trigger announced.
  let running = null;
  let followUp = null;
  function sync() {
    if (!running) {
      running = locked(syncOnce).finally(() => { running = null; });
      return running;
    }
    if (!followUp) {
      followUp = running.catch(() => {}).then(() => { followUp = null; return sync(); });
    }
    return followUp;
  }

  // ---- Web Push registration ----

  // Firefox loses a subscribe() made while its push service is still starting: the promise never settles.
  // So each attempt is raced against a timeout, and retried.
  async function subscribe(registration, applicationServerKey) {
    const attempts = 5;
    for (let attempt = 1; ; attempt += 1) {
      let timer;
      const timeout = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('subscribe() did not settle')), 5000);
      });
      try {
        return await Promise.race([
          registration.pushManager.subscribe({userVisibleOnly: true, applicationServerKey}), timeout]);
      } catch (error) {
        if (error.name === 'NotAllowedError' || attempt === attempts) throw error;
        console.info(`push: subscribe attempt ${attempt} failed (${error.message}); retrying`);
        await new Promise(resolve => setTimeout(resolve, 1000));
      } finally {
        clearTimeout(timer);
      }
    }
  }

  // Makes sure this browser is subscribed with the server's VAPID key and registered as a device of the session.
  // Reuses a subscription the server already knows unless `force`; resolves the stored device record.
  async function registerPush(registration, {force = false} = {}) {
    const session = await getMeta('session');
    if (!session) throw new Error('not signed in');
    const {publicKey} = await api('GET', '/v1/webpush/vapid-public-key');
    let subscription = await registration.pushManager.getSubscription();
    const device = await getMeta('device');
    if (subscription) {
      const key = subscription.options && subscription.options.applicationServerKey;
      if (key && base64urlEncode(key) !== publicKey) {   // the server's key changed: the old one is useless
        await subscription.unsubscribe();
        subscription = null;
      } else if (!force && device && device.endpoint === subscription.endpoint && device.vapidKey === publicKey) {
        return device;
      }
    }
    if (!subscription) subscription = await subscribe(registration, base64urlDecode(publicKey));
    const answer = await api('POST', '/v1/devices', {
      token: session.accessToken,
      body: {service: 'webpush', subscription: subscription.toJSON()},
    });
    const record = {key: 'device', id: answer.id, alias: answer.alias, signalKey: answer.signalKey,
                    endpoint: subscription.endpoint, vapidKey: publicKey};
    await putMeta(record);
    return record;
  }

  return {ApiError, api, getMeta, putMeta, deleteMeta, allMessages, clear, stateTag, isCurrent, sync,
          registerPush};
})();
