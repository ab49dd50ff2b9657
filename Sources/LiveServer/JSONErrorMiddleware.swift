import Hummingbird

/// Gives every failure the API's JSON error body: unknown routes (404), bodies the framework
/// refuses, and anything unforeseen, which becomes a 503 rather than a bare 500.
struct JSONErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError {
            let code = error.status.code
            let message = code == 404 ? "no such route: \(request.method) \(request.uri.path)" : (error.body ?? error.status.reasonPhrase)
            let status = (400..<600).contains(code) && code != 500 ? code : 503
            return ExperimentHTTPServer.failure(APIError(status: status, message, expected: code == 404 ? "a route listed in /openapi.yaml" : nil))
        } catch {
            return ExperimentHTTPServer.failure(APIError(status: 503, "the server could not complete the request: \(error)", retryAfter: 1))
        }
    }
}
