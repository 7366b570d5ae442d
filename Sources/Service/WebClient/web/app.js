// The page: sign-in, the mailbox list, and push setup. The list is always rendered from IndexedDB (mail-sync.js);
// the page syncs on load and whenever it becomes visible, and the service worker syncs on each push and tells the
// page to re-render. So the page converges even when pushes are lost.
'use strict';

const $ = id => document.getElementById(id);
const view = {mailbox: 'inbox', push: '', state: '', note: ''};

// ---- status line (also read by tests: data-push, data-state) ----

function setStatus(changes) {
  Object.assign(view, changes);
  const status = $('status');
  status.dataset.push = view.push;
  status.dataset.state = view.state;
  const parts = [];
  if (view.push) parts.push(`push ${view.push}`);
  if (view.state) parts.push(`synced ${view.state}`);
  if (view.note) parts.push(view.note);
  status.textContent = parts.join(' · ');
}

// ---- rendering ----

function formatDate(seconds) {
  const date = new Date(seconds * 1000);
  return date.toDateString() === new Date().toDateString()
    ? date.toLocaleTimeString([], {hour: '2-digit', minute: '2-digit'})
    : date.toLocaleDateString();
}

function row(message) {
  const item = document.createElement('li');
  item.dataset.id = message.id;
  item.className = message.seen ? 'seen' : 'unread';
  item.tabIndex = 0;
  for (const [name, text] of [['from', message.from], ['subject', message.subject || '(no subject)'],
                              ['date', formatDate(message.receivedAt)]]) {
    const cell = document.createElement('span');
    cell.className = name;
    cell.textContent = text;   // text only: message fields never become markup
    item.append(cell);
  }
  return item;
}

async function render() {
  const messages = (await MailSync.allMessages())
    .filter(message => message.mailbox === view.mailbox)
    .sort((a, b) => b.receivedAt - a.receivedAt);
  $('messages').replaceChildren(...messages.map(row));
  $('empty').hidden = messages.length > 0;
  for (const button of document.querySelectorAll('#folders [data-mailbox]')) {
    button.setAttribute('aria-pressed', String(button.dataset.mailbox === view.mailbox));
  }
  const state = await MailSync.getMeta('state');
  setStatus({state: state ? state.value : ''});
}

// ---- sync ----

async function syncNow() {
  try {
    await MailSync.sync();
    setStatus({note: ''});
  } catch (error) {
    if (error instanceof MailSync.ApiError && error.status === 401) return signedOut('Your session has ended.');
    setStatus({note: `sync failed: ${error.message}`});
  }
  await render();
}

// ---- push ----

async function setUpPush({force = false} = {}) {
  if (!('serviceWorker' in navigator) || !('PushManager' in window)) return setStatus({push: 'unsupported'});
  setStatus({push: 'subscribing'});
  $('enable-push').hidden = true;
  try {
    const registration = await navigator.serviceWorker.ready;
    await MailSync.registerPush(registration, {force});
    setStatus({push: 'subscribed'});
  } catch (error) {
    if (error instanceof MailSync.ApiError && error.code === 'webPushDisabled') return setStatus({push: 'unsupported'});
    console.warn('push: not subscribed:', error.name, error.message);
    setStatus({push: 'failed'});
    $('enable-push').hidden = false;   // a click is a user gesture, which a permission prompt may need
  }
}

// ---- sign-in and sign-out ----

function show(signedIn) {
  $('signin-form').hidden = signedIn;
  $('mailbox').hidden = !signedIn;
  $('signout').hidden = !signedIn;
}

async function signIn(event) {
  event.preventDefault();
  const form = event.currentTarget;
  const button = form.querySelector('button[type=submit]');
  $('signin-error').textContent = '';
  button.disabled = true;
  try {
    const answer = await MailSync.api('POST', '/v1/session', {body: {
      username: $('username').value, password: $('password').value, deviceName: 'web'}});
    await MailSync.clear();   // a new session starts from an empty local copy
    await MailSync.putMeta({key: 'session', accessToken: answer.accessToken, accountId: answer.accountId,
                            username: $('username').value});
    form.reset();
    show(true);
    await Promise.all([syncNow(), setUpPush({force: true})]);
  } catch (error) {
    $('signin-error').textContent = error instanceof MailSync.ApiError && error.status === 401
      ? 'Wrong username or password.' : `Cannot sign in: ${error.message}`;
  } finally {
    button.disabled = false;
  }
}

// Forgets the local copy and the subscription (the server revokes the session's devices with the session).
async function signedOut(note) {
  try {
    const registration = 'serviceWorker' in navigator ? await navigator.serviceWorker.getRegistration() : null;
    const subscription = registration && registration.pushManager ? await registration.pushManager.getSubscription()
                                                                  : null;
    if (subscription) await subscription.unsubscribe();
  } catch (error) {
    console.warn('push: unsubscribe failed:', error.message);
  }
  await MailSync.clear();
  $('messages').replaceChildren();
  show(false);
  setStatus({push: '', state: '', note: note || ''});
}

async function signOut() {
  const session = await MailSync.getMeta('session');
  if (session) await MailSync.api('DELETE', '/v1/session', {token: session.accessToken}).catch(() => {});
  await signedOut();
}

// ---- actions on messages ----

async function markSeen(item) {
  if (!item || !item.classList.contains('unread')) return;
  const session = await MailSync.getMeta('session');
  try {
    await MailSync.api('PATCH', `/v1/messages/${item.dataset.id}`, {token: session.accessToken, body: {seen: true}});
  } catch (error) {
    setStatus({note: `cannot mark as read: ${error.message}`});
  }
  await syncNow();
}

// ---- start ----

async function start() {
  $('signin-form').addEventListener('submit', signIn);
  $('signout').addEventListener('click', signOut);
  $('enable-push').addEventListener('click', () => setUpPush({force: true}));
  $('folders').addEventListener('click', event => {
    const mailbox = event.target.dataset && event.target.dataset.mailbox;
    if (mailbox) { view.mailbox = mailbox; render(); }
  });
  $('messages').addEventListener('click', event => markSeen(event.target.closest('li[data-id]')));
  $('messages').addEventListener('keydown', event => {
    if (event.key === 'Enter') markSeen(event.target.closest('li[data-id]'));
  });

  if ('serviceWorker' in navigator) {
    // Setting onmessage (rather than addEventListener) starts the delivery of the worker's messages.
    navigator.serviceWorker.onmessage = event => {
      if (event.data && event.data.type === 'synced') render();
    };
    navigator.serviceWorker.register('sw.js', {scope: './'}).catch(error => {
      console.warn('push: service worker registration failed:', error.message);
    });
  }
  document.addEventListener('visibilitychange', async () => {
    if (document.visibilityState === 'visible' && await MailSync.getMeta('session')) syncNow();
  });

  const session = await MailSync.getMeta('session');
  show(Boolean(session));
  if (!session) return;
  await render();
  await Promise.all([syncNow(), setUpPush()]);
}

start();
