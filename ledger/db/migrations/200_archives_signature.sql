-- Issue 24 item 6: what the ledger found of an archive's wacz-auth signature at admission
-- (ledger/archive/signature.py). `signed` (existing) is now the ledger's own finding when it
-- read the WACZ; signature_domain = the signer's domain (signedData.domain); signature_verified
-- = the signature, its certificate chains and timestamp verified against the trusted roots.
-- A signed WACZ that does not verify is never admitted, so verified is true, NULL (not
-- checked: rows from before) or false only when a report claimed a signature its WACZ lacks.
ALTER TABLE archives ADD COLUMN IF NOT EXISTS signature_domain text;
ALTER TABLE archives ADD COLUMN IF NOT EXISTS signature_verified boolean;
