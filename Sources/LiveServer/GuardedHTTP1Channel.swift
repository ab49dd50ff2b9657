import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1

/// HTTP/1.1 as Hummingbird serves it, with a ``ConnectionGuard`` on each connection between
/// the request decoder and the rest of the pipeline.
struct GuardedHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value

    let base: HTTP1Channel
    let limits: ConnectionLimits
    let registry: ConnectionRegistry
    /// The largest request body accepted (`--max-body`).
    let maxBody: Int

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        base.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let pipeline = channel.pipeline.syncOperations
            let decoder = try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try pipeline.addHandler(ConnectionGuard(limits: limits, registry: registry, maxBody: maxBody), position: .after(decoder))
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}
