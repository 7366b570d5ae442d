// The service worker (scope /web/): turns a content-free Web Push signal into a sync over /v1/changes.
//
// A signal's plaintext is exactly {"acct": ALIAS, "st": TAG, "badge"?: N}. If TAG is the tag of the local state
// there is nothing to fetch; otherwise the worker syncs itself, with the token kept in IndexedDB, and tells every
// open page to re-render from IndexedDB.
//
// Notifications: the subscription is made with userVisibleOnly: true (Chrome requires it; Firefox accepts it).
// A page of ours that is visible already shows the new mail, so no notification then. When no page is visible and
// the sync brought unread mail, one notification ("N new messages", no message content) is shown, replacing the
// previous one. Firefox charges every push without a notification against a quota (16, restored while a page of
// the site is open or visited) and drops the subscription when it runs out; Chrome may show its own "updated in
// the background" notice for such pushes. Pushes that bring nothing new are rare (one per change, coalesced by
// the server), so this is the trade: no notification noise for state the user already has.
'use strict';

importScripts('mail-sync.js');

self.addEventListener('install', event => event.waitUntil(self.skipWaiting()));
self.addEventListener('activate', event => event.waitUntil(self.clients.claim()));

self.addEventListener('push', event => event.waitUntil(onPush(event.data)));

async function onPush(data) {
  let signal = null;
  try {
    signal = data ? data.json() : null;
  } catch (error) {
    // Not our JSON: treat it as "something changed".
  }
  const device = await MailSync.getMeta('device');
  if (signal && device && signal.acct !== device.alias) return;   // for another registration of this browser
  if (signal && await MailSync.isCurrent(signal.st)) return;      // the local copy is already at that state
  const result = await MailSync.sync();
  if (!result) return;                                            // signed out
  const pages = await self.clients.matchAll({type: 'window', includeUncontrolled: true});
  for (const page of pages) page.postMessage({type: 'synced', state: result.state});
  if (result.createdUnseen > 0 && !pages.some(page => page.visibilityState === 'visible')) {
    await notify(result.createdUnseen);
  }
}

async function notify(count) {
  if (self.Notification && Notification.permission !== 'granted') return;
  try {
    await self.registration.showNotification('New mail', {
      body: count === 1 ? '1 new message' : `${count} new messages`,
      tag: 'signalfetch-new-mail',
      renotify: true,
    });
  } catch (error) {
    console.warn('push: cannot show a notification:', error.message);
  }
}

self.addEventListener('notificationclick', event => {
  event.notification.close();
  event.waitUntil((async () => {
    const pages = await self.clients.matchAll({type: 'window', includeUncontrolled: true});
    if (pages.length > 0) return pages[0].focus();
    return self.clients.openWindow(self.registration.scope);
  })());
});

// The browser dropped or replaced the subscription (Firefox: quota used up, or its push service gave a new
// identity). Subscribe again and register the new address, so signals keep coming.
self.addEventListener('pushsubscriptionchange', event => {
  event.waitUntil(MailSync.registerPush(self.registration, {force: true}).catch(error => {
    console.warn('push: re-subscribing failed:', error.message);
  }));
});
