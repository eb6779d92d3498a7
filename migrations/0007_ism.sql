-- Implicit semantic machines: a transition may be taken by an action the soul chose
-- (its name) instead of a rule of the process file.
ALTER TABLE process_transitions ADD COLUMN action TEXT;
