-- Version 19: a turn's window found without reading the thread's every entry. Released: never
-- edit; add 0020_… instead.

-- What was said in a thread (its messages and replies): a turn counts these to find where its
-- window starts (memory::working::recent). Through the thread's index alone, the count and the
-- step to the window's start read every entry the thread ever had, thoughts included, from the
-- table; through this one they read only what was said, from the index. On a synthetic table of
-- 50 threads of 4,000 exchanges, their entries interleaved as a busy workspace leaves them,
-- the two reads of one thread took 19 and 17 ms without it, 0.6 and 1.5 ms with it.
CREATE INDEX working_memory_said ON working_memory (thread, id)
    WHERE entry_type IN ('userMessage', 'externalDialog');
