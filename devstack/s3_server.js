// S3 stand-in for the local stack: s3rver (pinned in package.json) on loopback, path-style,
// objects kept on disk under --data, one bucket created at start, one extra key pair.
// Prints one JSON line {"host","port"} on stdout once listening; launched by devstack/s3.py.
'use strict';
const S3rver = require('s3rver');
const Account = require('s3rver/lib/models/account');

function arg(name, dflt) {
  const i = process.argv.indexOf('--' + name);
  return i >= 0 ? process.argv[i + 1] : dflt;
}

const host = arg('host', '127.0.0.1');
const port = Number(arg('port', '0'));
const data = arg('data');
const bucket = arg('bucket', 'browserhive');
const accessKey = arg('access-key', 'browserhive');
const secretKey = arg('secret-key', 'browserhive');
if (!data) {
  process.stderr.write('--data DIR is required\n');
  process.exit(2);
}
Account.DUMMY_ACCOUNT.createKeyPair(accessKey, secretKey);

// s3rver 3.7.1 reads a suffix range `bytes=-N` (RFC 9110 §14.1.2: the last N bytes) as
// `bytes=0-N`, the file's head. ReplayWeb.page opens a WACZ by its zip directory at the end with
// exactly such a range, so every archive over 64 KiB failed to replay. Rewritten here into the
// equivalent first-last range before s3rver's own GetObject runs.
const objectCtrl = require('s3rver/lib/controllers/object');
const getObject = objectCtrl.getObject;
objectCtrl.getObject = async function getObjectWithSuffixRanges(ctx) {
  const suffix = /^bytes=-(\d+)$/.exec(ctx.headers['range'] || '');
  if (suffix) {
    let size = null;
    try {
      const meta = await ctx.store.getMetadata(ctx.params.bucket, ctx.params.key);
      size = Number(meta['content-length']);
    } catch (err) {
      if (err.code !== 'ENOENT') throw err; // a missing key: s3rver answers NoSuchKey itself
    }
    if (size !== null && size > 0) {
      const first = Math.max(0, size - Number(suffix[1]));
      ctx.headers['range'] = `bytes=${first}-${size - 1}`;
    }
  }
  return getObject(ctx);
};

// CORS: the ledger's web page replays a WACZ in the browser (ReplayWeb.page's service worker
// reads it with Range requests through its signed URL), from another loopback origin.
// The stand-in listens on loopback only, so any origin may read what a signed URL allows.
const cors = `<CORSConfiguration><CORSRule>
  <AllowedOrigin>*</AllowedOrigin>
  <AllowedMethod>GET</AllowedMethod><AllowedMethod>HEAD</AllowedMethod>
  <AllowedHeader>*</AllowedHeader>
  <ExposeHeader>Content-Range</ExposeHeader><ExposeHeader>Content-Length</ExposeHeader>
  <ExposeHeader>Accept-Ranges</ExposeHeader><ExposeHeader>ETag</ExposeHeader>
  <MaxAgeSeconds>600</MaxAgeSeconds>
</CORSRule></CORSConfiguration>`;

const server = new S3rver({
  address: host,
  port,
  directory: data,
  silent: process.env.S3_VERBOSE !== '1',
  vhostBuckets: false,
  configureBuckets: [{ name: bucket, configs: [cors] }],
});
server.run().then(
  (addr) => process.stdout.write(JSON.stringify({ host: addr.address, port: addr.port }) + '\n'),
  (err) => {
    process.stderr.write(`s3 stand-in failed to start: ${err && err.message}\n`);
    process.exit(1);
  },
);
const stop = () => server.close().finally(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
