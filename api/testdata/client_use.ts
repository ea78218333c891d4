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

// A client sends back the min_score it read (a decimal string), or a number.
type Settings = components["schemas"]["KnowledgeSearchSettings"];
type TuneSettings = NonNullable<paths["/user/document/{knowledge_id}/settings/search"]["patch"]["requestBody"]>["content"]["application/json"];
declare const settings: Settings;
const tune: TuneSettings = { min_score: settings.min_score, top_k: settings.top_k };
const tuneNumber: TuneSettings = { min_score: 0.25 };
const reset: TuneSettings = { min_score: null };
console.log(body, describe(created), position, tune, tuneNumber, reset);
