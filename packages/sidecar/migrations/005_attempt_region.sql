-- The regional block engine that took each bundle (its name, as GET /status lists it; issue 30: landing and cost per
-- region). Null until an engine answered with an id, and on attempts recorded before this column.
ALTER TABLE attempts ADD COLUMN region text;
