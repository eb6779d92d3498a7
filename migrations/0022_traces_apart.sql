-- Version 22: the traces live in a file of their own (memory::trace_file), which took this
-- table's rows before this step. Released: never edit; add 0023_… instead.
DROP TABLE traces;
