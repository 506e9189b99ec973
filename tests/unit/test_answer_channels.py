"""AnswerChannels without Ray: answers released together leave in one item, answers wait for a
channel that is not connected, and a reopened channel takes over from its predecessor."""

from __future__ import annotations

import asyncio

from cluster.actors.answer_channels import AnswerChannels


def test_the_first_item_names_the_incarnation_then_answers_put_together_leave_together():
    async def run():
        channels = AnswerChannels()
        stream = channels.stream("gw", "inc-1")
        assert await anext(stream) == ("inc-1", [])
        following = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0)
        for ticket in range(1001):  # a join phase completing: every answer in one shard pass
            channels.put("gw", ticket, f"answer {ticket}")
        incarnation, answers = await following
        await stream.aclose()
        return incarnation, answers

    incarnation, answers = asyncio.run(run())
    assert incarnation == "inc-1"
    assert answers == [(t, f"answer {t}") for t in range(1001)]


def test_answers_put_before_the_channel_connects_are_kept_for_it_and_for_no_other():
    async def run():
        channels = AnswerChannels()
        channels.put("gw-a", 1, "a1")
        channels.put("gw-b", 7, "b7")
        stream = channels.stream("gw-a", "inc")
        first = await anext(stream)
        await stream.aclose()
        return first

    assert asyncio.run(run()) == ("inc", [(1, "a1")])


def test_a_reopened_channel_ends_its_predecessor_and_gets_what_it_had_not_sent():
    async def run():
        channels = AnswerChannels()
        old = channels.stream("gw", "inc")
        await anext(old)
        old_next = asyncio.ensure_future(anext(old))
        await asyncio.sleep(0)
        new = channels.stream("gw", "inc")
        await anext(new)
        try:
            await old_next
            ended = False
        except StopAsyncIteration:
            ended = True
        channels.put("gw", 3, "x")
        after = await anext(new)
        await new.aclose()
        return ended, after

    assert asyncio.run(run()) == (True, ("inc", [(3, "x")]))


def test_answers_put_while_no_one_reads_wait_for_the_next_reader():
    async def run():
        channels = AnswerChannels()
        first = channels.stream("gw", "inc")
        await anext(first)
        await first.aclose()  # the gateway's reader went away
        channels.put("gw", 5, "late")
        second = channels.stream("gw", "inc")
        item = await anext(second)
        await second.aclose()
        return item

    assert asyncio.run(run()) == ("inc", [(5, "late")])
