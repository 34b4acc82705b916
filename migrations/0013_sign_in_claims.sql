-- The claims request each pending sign-in sent to the authorize endpoint (the challenge it must
-- satisfy merged with the client capabilities' xms_cc), sent again with the code redemption
-- (behaviour §1 "Claims challenge": every token request carries xms_cc when client capabilities are
-- configured; issue 10 item 2). Not a secret: a claims request names policies, not credentials.
-- Null when none was sent, and for rows an older replica wrote during a rolling upgrade (the
-- redemption then sends the capabilities alone).
ALTER TABLE sign_ins ADD COLUMN claims text;
