"""The event-stream holders' bookkeeping: answers put back in the order the tokens were given, and a state event
found even when its name straddles two reads."""
import unittest

from signalfetch.streams import EVENT, Stream, undeal


class UndealTests(unittest.TestCase):
    def test_batches_dealt_round_the_holders_come_back_in_order(self):
        # Two batches, a b c d e then f g, dealt over two holders: a c e f to the first, b d g to the second.
        per_holder = [["a", "c", "e", "f"], ["b", "d", "g"]]
        self.assertEqual(undeal([5, 2], per_holder), list("abcdefg"))

    def test_more_holders_than_tokens(self):
        self.assertEqual(undeal([2, 3], [["a", "c"], ["b", "d"], ["e"]]), list("abcde"))


class LookTests(unittest.TestCase):
    def stream(self):
        stream = Stream.__new__(Stream)
        stream.tail, stream.first = b"", None
        return stream

    def test_an_event_name_split_over_two_reads_is_found_at_the_second(self):
        stream = self.stream()
        stream._look(b"id: x\n" + EVENT[:5], 1.0)
        self.assertIsNone(stream.first)
        stream._look(EVENT[5:] + b"\ndata: {}\n\n", 2.0)
        self.assertEqual(stream.first, 2.0)

    def test_the_first_event_is_kept(self):
        stream = self.stream()
        stream._look(EVENT + b"\n", 1.0)
        stream._look(EVENT + b"\n", 2.0)
        self.assertEqual(stream.first, 1.0)

    def test_a_ping_is_not_a_state_event(self):
        stream = self.stream()
        stream._look(b"event: ping\ndata: {}\n\n", 1.0)
        self.assertIsNone(stream.first)


if __name__ == "__main__":
    unittest.main()
