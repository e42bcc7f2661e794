"""The memory budget's arithmetic and the byte budget pages reserve from (no service)."""

from __future__ import annotations

import asyncio

import pytest

from crawler.config import DEFAULT_MAX_BODY_BYTES
from crawler.engine.membudget import ByteBudget, PageCost
from crawler.errors import UsageError
from crawler.service import budget, config
from crawler.service.budget import MIB

from kit.sitekit import wait_until

BOUND_S = 5.0


def test_the_shipped_limit_keeps_the_default_caps_for_two_crawls() -> None:
    plan = budget.plan(512 * MIB, 2)
    assert plan.max_body_bytes == DEFAULT_MAX_BODY_BYTES
    assert plan.max_links_per_page == budget.DEFAULT_MAX_LINKS_PER_PAGE
    assert plan.fixed_bytes + plan.page_budget_bytes <= 512 * MIB * (1 - budget.MARGIN)
    assert plan.page_budget_bytes >= budget.MIN_PAGES_AT_ONCE * plan.page_cost.worst()


@pytest.mark.parametrize(("size", "running"), [(256, 2), (384, 4), (192, 1)])
def test_a_smaller_budget_lowers_the_caps_and_still_fits(size: int, running: int) -> None:
    plan = budget.plan(size * MIB, running)
    assert plan.max_body_bytes < DEFAULT_MAX_BODY_BYTES
    assert plan.max_links_per_page < budget.DEFAULT_MAX_LINKS_PER_PAGE
    assert plan.fixed_bytes + plan.page_budget_bytes <= size * MIB * (1 - budget.MARGIN)
    budget.check_budget(size * MIB, running)


def test_a_budget_too_small_for_the_running_crawls_is_refused_at_start() -> None:
    with pytest.raises(UsageError, match="cannot hold 4 running crawls"):
        config.resolve({"memory_budget": "200M", "max_running": 4}, environ={})
    with pytest.raises(UsageError, match="at least"):
        config.resolve({}, environ={"CRAWLER_MEMORY_BUDGET": "64M"})
    assert config.resolve({}, environ={"CRAWLER_MEMORY_BUDGET": "1G"}).memory_budget_bytes == (
        1 << 30
    )


def test_the_default_is_the_cgroup_limit_when_lower(tmp_path) -> None:  # type: ignore[no-untyped-def]
    limit = tmp_path / "memory.max"
    limit.write_text("268435456\n")
    assert budget.default_budget(limit) == 256 * MIB
    limit.write_text("max\n")
    assert budget.default_budget(limit) == budget.SHIPPED_LIMIT_BYTES
    assert budget.default_budget(tmp_path / "absent") == budget.SHIPPED_LIMIT_BYTES


@pytest.mark.parametrize(
    ("text", "size"), [("512M", 512 * MIB), ("512MiB", 512 * MIB), ("1g", 1 << 30), ("1024", 1024)]
)
def test_sizes_parse(text: str, size: int) -> None:
    assert budget.parse_size(text) == size


def test_a_page_costs_its_worst_case_then_what_it_holds() -> None:
    cost = PageCost(10 * MIB, 50_000)
    assert cost.worst() >= cost.after_fetch(50_000) > cost.after_parse(100) > 0
    assert cost.after_fetch(0) == 0


async def test_reservations_wait_in_order_and_shrinking_frees_them() -> None:
    shared = ByteBudget(100)
    first = await shared.reserve(80)
    order: list[str] = []

    async def take(name: str, size: int) -> None:
        reservation = await shared.reserve(size)
        order.append(name)
        reservation.release()

    waiting = [asyncio.create_task(take("big", 60)), asyncio.create_task(take("small", 10))]
    await wait_until(lambda: shared.waiting == 2, BOUND_S)
    assert order == []  # "small" would fit, but waits behind "big": first come, first served
    first.shrink(30)
    await asyncio.wait_for(asyncio.gather(*waiting), BOUND_S)
    assert order == ["big", "small"]
    first.release()
    assert shared.used == 0
    assert shared.peak <= shared.total


async def test_a_reservation_larger_than_the_budget_takes_it_all() -> None:
    shared = ByteBudget(100)
    whole = await asyncio.wait_for(shared.reserve(10_000), BOUND_S)
    assert whole.size == 100
    whole.release()
    assert shared.used == 0


async def test_a_cancelled_wait_holds_nothing() -> None:
    shared = ByteBudget(100)
    held = await shared.reserve(100)
    waiter = asyncio.create_task(shared.reserve(50))
    await wait_until(lambda: shared.waiting == 1, BOUND_S)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    held.release()
    assert shared.used == 0
    again = await asyncio.wait_for(shared.reserve(100), BOUND_S)
    again.release()
