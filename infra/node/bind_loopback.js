// Preloaded (node --require) into servers that call listen(port) without an address and so bind every interface,
// such as Marquez's web UI server: a listen() given only a port binds LINEAGE_LAB_BIND_HOST (127.0.0.1) instead.
'use strict';
const net = require('net');

const host = process.env.LINEAGE_LAB_BIND_HOST || '127.0.0.1';
const listen = net.Server.prototype.listen;

net.Server.prototype.listen = function (...args) {
  const port = args[0];
  const portOnly = typeof port === 'number' || (typeof port === 'string' && /^\d+$/.test(port));
  if (portOnly && typeof args[1] !== 'string') {
    args.splice(1, 0, host);
  }
  return listen.apply(this, args);
};
