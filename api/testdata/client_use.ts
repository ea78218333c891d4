// A program using the TypeScript client generated from the OpenAPI document
// (TestGeneratedClients): it must type-check.
import type { paths, components } from "./lectern";

type Agent = components["schemas"]["Agent"];
type CreateAgent = NonNullable<paths["/agents"]["post"]["requestBody"]>["content"]["application/json"];
type Created = paths["/agents"]["post"]["responses"][201]["content"]["application/json"];
// Declared response headers have their types. An undeclared one would be
// unknown (the headers' index signature), which a string or a number does
// not accept: these assignments type-check only while the document
// declares the header.
type AgentCreated = paths["/agents"]["post"]["responses"][201]["headers"];
declare const createdHeaders: AgentCreated;
const position: string = createdHeaders["X-Event-Position"];
const where: string = createdHeaders["Location"]; // e.g. /agents/12: GET it to read the agent
const createdRequestID: string = createdHeaders["X-Request-ID"];
declare const readHeaders: paths["/agents/{agent_id}"]["get"]["responses"][200]["headers"];
const pending: "true" | undefined = readHeaders["X-Projection-Pending"];
declare const refusedHeaders: paths["/user/login"]["post"]["responses"][429]["headers"];
const retryAfter: number = refusedHeaders["Retry-After"];

const body: CreateAgent = { name: "Tutor", system_prompt: "Be kind" };
function describe(a: Agent): string {
  return `${a.agent_id}: ${a.name}`;
}
declare const created: Created;

// A client sends back the min_score it read (a decimal string), or a number.
type Settings = components["schemas"]["KnowledgeSearchSettings"];
type TuneSettings = NonNullable<paths["/user/document/{knowledge_id}/settings/search"]["patch"]["requestBody"]>["content"]["application/json"];
declare const settings: Settings;
const tune: TuneSettings = { min_score: settings.min_score, top_k: settings.top_k };
const tuneNumber: TuneSettings = { min_score: 0.25 };
const reset: TuneSettings = { min_score: null };
console.log(body, describe(created), position, where, createdRequestID, pending, retryAfter, tune, tuneNumber, reset);
