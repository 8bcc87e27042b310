// The client API's two public classes (index.js and node.js export them): the Engine
// (client/engine.js, which lists the modules it is made of) and the stream of a streamed request.

export { Engine } from './client/engine.js';
export { CompletionStream } from './client/stream.js';
