"""The decoding core: the round loop (the policy picks a drafter and K, the drafter proposes,
the target verifies in one pass), exact verification, the policies that choose, and where
an answer's kept tokens came from."""
