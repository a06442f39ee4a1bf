/**
 * The standalone server's socket: `node:http` (Node's own, Bun's and Deno's emulation), with the
 * graceful close the server needs. No listener library: an app that mounts the module never
 * installs one (listhen brought h3 v1 and a dozen more packages).
 */
import { createServer, type RequestListener, type Server } from "node:http";
import type { Socket } from "node:net";

export interface HttpListener {
  server: Server;
  /** The bound port (the one the OS picked for port 0). */
  port: number;
  /** Stops accepting, closes idle keep-alive connections at once and busy ones once their response is sent; resolves when all are closed. */
  close(): Promise<void>;
}

/** Listens on `host`:`port` (0: a free port). A taken port fails with the socket's `EADDRINUSE`: no hopping to another. */
export async function listenHttp(handler: RequestListener, host: string, port: number): Promise<HttpListener> {
  const server = createServer(handler);
  const sockets = new Set<Socket>();
  // Responses in flight per socket (a keep-alive socket carries one at a time; pipelining more).
  const busy = new Map<Socket, number>();
  let closing = false;
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => {
      sockets.delete(socket);
      busy.delete(socket);
    });
  });
  server.on("request", (request, response) => {
    const socket = request.socket;
    busy.set(socket, (busy.get(socket) ?? 0) + 1);
    response.once("close", () => {
      const left = (busy.get(socket) ?? 1) - 1;
      if (left > 0) return void busy.set(socket, left);
      busy.delete(socket);
      if (closing) socket.destroy();
    });
  });
  await new Promise<void>((done, fail) => {
    server.once("error", fail);
    server.listen(port, host, () => {
      server.off("error", fail);
      done();
    });
  });
  const address = server.address();
  let closed: Promise<void> | undefined;
  return {
    server,
    port: typeof address === "object" && address ? address.port : port,
    close: () =>
      (closed ??= new Promise<void>((done) => {
        closing = true;
        server.close(() => done());
        for (const socket of sockets) if (!busy.has(socket)) socket.destroy();
      })),
  };
}
