"""Live mode: following a rotating capture ring (`kwire live`) and the rotation hook that feeds
it closed capture files (`kwire-spool`, kwire.live.spool)."""
