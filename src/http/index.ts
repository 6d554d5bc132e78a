export { clientApp } from "./client-app.ts";
export { adminApp } from "./admin-app.ts";
export { listen, type BoundServer } from "./server.ts";
export { requestBodyBytesMax } from "./body.ts";
