"""Webhook deliveries: signed, retried with backoff for a bounded time, persisted.

When a run of a definition finishes with new broken links, the scheduler
builds the delivery (``WebhookSender.new``) and the manager records it in the
transaction that records the run finished (``ServiceStore.finish``), then
hands it to ``track``: a kill between a run's end and its notification cannot
lose the one nor send the other twice (the run resumes, finds its crawl done
and records both). From then on the delivery is a row of the store
(``Delivery``: pending, delivered or failed, attempts, last status or error),
so a restarted service resumes the pending ones. A delivery is deleted with
its run (``forget``); retention keeps a run while its delivery is pending.

- The body is JSON, sent as the exact bytes stored; the header
  ``X-Crawler-Signature: sha256=<hex>`` is the HMAC-SHA256 of those bytes
  under the webhook's secret (``signature``).
- A 2xx answer delivers it. Anything else (another status, a network error,
  a timeout) is retried after ``first_retry_s``, doubling up to
  ``max_retry_s``, until ``give_up_after_s`` after its creation: then failed.
- The target goes through the crawls' private-address guard: unless the
  operator allows private addresses (``--allow-private``), an IP literal or a
  name resolving to a private, loopback or link-local address outside
  ``--allow-network`` is refused before any connection (``AddressGuard``,
  ``PublicOnlyResolver``), and the delivery fails at once. Redirects are not
  followed (a redirect could lead past the guard's first answer).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import aiohttp
import structlog
from yarl import URL

from crawler.net import storable
from crawler.net.proxied import AiohttpResolver
from crawler.net.resolver import AddressGuard
from crawler.netguard import PrivateAddressError, parse_networks
from crawler.store.service import Delivery, ServiceStore

log = structlog.get_logger(__name__)

SIGNATURE_HEADER = "X-Crawler-Signature"
MAX_WAKE_S = 1.0  # the loop looks at the clock at least this often
MAX_ERROR_CHARS = 500


class Clock(Protocol):
    def __call__(self) -> float: ...


@dataclass
class WebhookPolicy:
    """How hard a delivery is tried."""

    first_retry_s: float = 10.0
    max_retry_s: float = 600.0
    give_up_after_s: float = 3600.0
    timeout_s: float = 10.0


def signature(secret: str, body: bytes) -> str:
    """The ``X-Crawler-Signature`` value of ``body`` under ``secret``."""
    digest = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def retry_delay_s(policy: WebhookPolicy, attempts: int) -> float:
    """Wait after the ``attempts``-th failed attempt: doubling, capped."""
    return float(min(policy.first_retry_s * 2 ** max(attempts - 1, 0), policy.max_retry_s))


@dataclass
class WebhookSender:
    """Delivers the store's pending deliveries (module docstring)."""

    store_of: Callable[[], ServiceStore]  # the manager's, once it is open
    clock: Clock
    secret_of: Callable[[int], str | None]  # definition id -> its webhook's secret
    allow_private: bool
    allow_networks: list[str]
    policy: WebhookPolicy = field(default_factory=WebhookPolicy)
    _pending: dict[int, Delivery] = field(default_factory=dict)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        for delivery in await self.store_of().deliveries():
            if delivery.state == "pending":
                self._pending[delivery.id] = delivery
        if self._pending:
            log.info("webhooks_resuming", deliveries=sorted(self._pending))
        self._task = asyncio.create_task(self._loop(), name="webhooks")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def new(self, definition_id: int, crawl_id: int, url: str, body: bytes) -> Delivery:
        """A pending delivery, due now, not recorded yet (its id is 0)."""
        now = self.clock()
        return Delivery(0, definition_id, crawl_id, url, body, "pending", 0, now, now)

    async def enqueue(self, definition_id: int, crawl_id: int, url: str, body: bytes) -> Delivery:
        """Record a new delivery on its own and send it."""
        delivery = await self.store_of().insert_delivery(
            self.new(definition_id, crawl_id, url, body)
        )
        self.track(delivery)
        return delivery

    def track(self, delivery: Delivery) -> None:
        """Send a delivery the store has recorded."""
        self._pending[delivery.id] = delivery
        log.info("webhook_queued", delivery_id=delivery.id, definition_id=delivery.definition_id)
        self._wake.set()

    def forget(self, crawl_id: int) -> None:
        """The run was deleted, its deliveries with it: stop sending them."""
        for delivery in [d for d in self._pending.values() if d.crawl_id == crawl_id]:
            del self._pending[delivery.id]

    def pending_crawls(self) -> set[int]:
        """The runs whose delivery is still being tried."""
        return {d.crawl_id for d in self._pending.values()}

    def poke(self) -> None:
        """Look at the pending deliveries now (after the clock moved, say)."""
        self._wake.set()

    async def _loop(self) -> None:
        while True:
            self._wake.clear()
            await self.deliver_due()
            waits = [d.next_attempt_at - self.clock() for d in self._pending.values()]
            wait_s = min([MAX_WAKE_S, *waits])
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=max(wait_s, 0.01))

    async def deliver_due(self) -> None:
        """One attempt at each delivery that is due."""
        due = [d for d in self._pending.values() if d.next_attempt_at <= self.clock()]
        for delivery in sorted(due, key=lambda d: d.id):
            if delivery.id not in self._pending:  # forgotten meanwhile (its run deleted)
                continue
            try:
                await self._attempt(delivery)
            except Exception:  # the store failed: try again on the next round
                log.exception("webhook_attempt_failed", delivery_id=delivery.id)

    async def _attempt(self, delivery: Delivery) -> None:
        secret = self.secret_of(delivery.definition_id)
        status: int | None = None
        error: str | None = None
        final = False
        if secret is None:
            error, final = "the definition or its webhook was removed", True
        else:
            try:
                status = await self._post(delivery, secret)
            except PrivateAddressError as exc:
                error, final = f"refused by the private-address guard: {exc}", True
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                cause = exc.__cause__ or exc.__context__
                if isinstance(cause, PrivateAddressError):
                    error, final = f"refused by the private-address guard: {cause}", True
                else:
                    # The receiver's bytes may be in it: kept as a store can keep them.
                    error = storable.text(f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS])
        now = self.clock()
        delivery.attempts += 1
        delivery.last_status = status
        delivery.last_error = error
        if status is not None and 200 <= status < 300:
            delivery.state, delivery.finished_at = "delivered", now
        else:
            if status is not None:
                delivery.last_error = f"HTTP {status}"
            next_at = now + retry_delay_s(self.policy, delivery.attempts)
            if final or next_at > delivery.created_at + self.policy.give_up_after_s:
                delivery.state, delivery.finished_at = "failed", now
            else:
                delivery.next_attempt_at = next_at
        await self.store_of().update_delivery(delivery)
        if delivery.state != "pending":
            self._pending.pop(delivery.id, None)
        log.info(
            "webhook_attempted",
            delivery_id=delivery.id,
            state=delivery.state,
            attempts=delivery.attempts,
            status=status,
            error=delivery.last_error,
        )

    async def _post(self, delivery: Delivery, secret: str) -> int:
        """The answer's status; the guard refuses a private target before connecting."""
        url = URL(delivery.url)
        connector: aiohttp.TCPConnector
        if self.allow_private:
            connector = aiohttp.TCPConnector()
        else:
            guard = AddressGuard(parse_networks(self.allow_networks))
            await guard.check(url, via_proxy=False)
            connector = aiohttp.TCPConnector(resolver=AiohttpResolver(guard.resolver))
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: signature(secret, delivery.body),
            "User-Agent": "crawler-webhook",
        }
        timeout = aiohttp.ClientTimeout(total=self.policy.timeout_s)
        async with (
            aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False) as http,
            http.post(url, data=delivery.body, headers=headers, allow_redirects=False) as answer,
        ):
            return answer.status  # the body is not read: only the status counts
