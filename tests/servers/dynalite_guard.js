// Runs dynalite's own CLI (argv[2]) so that a client aborting a request mid-body drops that
// one request, as a real endpoint does, instead of killing the server: dynalite rethrows a
// request's 'error' event (index.js: req.on('error', function (err) { throw err })), and a
// ledger's whole-call deadline closes sockets mid-request by design. Any other uncaught
// error still ends the process.
'use strict'
process.on('uncaughtException', function (err) {
  if (err && err.code === 'ECONNRESET' && err.message === 'aborted') {
    console.error('dynalite-guard: a client aborted a request before its end')
    return
  }
  console.error(err)
  process.exit(70)
})
var cli = process.argv[2]
process.argv.splice(2, 1)
require(cli)
