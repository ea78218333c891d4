// A program using the TypeScript client generated from the OpenAPI document
// (TestGeneratedClients): it must type-check.
import type { paths, components } from "./lectern";

type Agent = components["schemas"]["Agent"];
type CreateAgent = NonNullable<paths["/agents"]["post"]["requestBody"]>["content"]["application/json"];
type Created = paths["/agents"]["post"]["responses"][201]["content"]["application/json"];
type Position = paths["/agents"]["post"]["responses"][201]["headers"]["X-Event-Position"];

const body: CreateAgent = { name: "Tutor", system_prompt: "Be kind" };
function describe(a: Agent): string {
  return `${a.agent_id}: ${a.name}`;
}
declare const created: Created;
const position: Position = "123-4";
console.log(body, describe(created), position);
